"""The OOM fallback for the user's own training loop (issue 29): an optimizer step that runs out
of memory is run again, whole, at the next setting that keeps its samples (a smaller micro
batch, more accumulation), so no sample is lost and none counts twice; with several ranks,
every rank agrees before any of them steps or retries, so none waits alone in a collective.

    fallback = OOMFallback.from_recommendation(advisor.recommend(...))
    for samples in steps:  # each: this rank's samples of one optimizer step
        fallback.step(samples, micro_step, finish, discard)

micro_step(micro, weight) runs the forward and backward of one micro batch, its loss times
weight (the micro batch's share of the step's samples: the mean over the step, whatever the
split). finish() synchronises gradients (with several ranks), steps the optimizer and zeroes
the gradients; discard() zeroes them (set_to_none=True) after a failed try. With several ranks,
gradients are synchronised in finish(), after the agreement: DDP's own synchronisation inside
backward would leave a rank that ran out of memory outside the collective the others wait in
(run micro steps under model.no_sync(), or without DDP, and all-reduce in finish()).
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from advisor.errors import ConfigError
from advisor.recommendation import Recommendation
from advisor.result import TrialResult
from advisor.trial.out_of_memory import ran_out


@dataclasses.dataclass(frozen=True)
class Split:
    """How a step's samples are split: micro batches of micro_batch, accumulation of them."""

    micro_batch: int
    accumulation: int

    @property
    def samples(self) -> int:
        return self.micro_batch * self.accumulation


@dataclasses.dataclass(frozen=True)
class FellBack:
    """One fallback: the step that ran out of memory, the split it had and the one it now has,
    and what the allocator said (this rank's; another rank's OOM is said as such)."""

    step: int
    was: Split
    now: Split
    message: str


class OutOfSplits(Exception):
    """Every split ran out of memory: the step cannot run on this memory."""


class OOMFallback:
    """Runs each optimizer step at the first split of `splits` that has not run out of memory,
    and from then on keeps to it. splits: the fastest first, each with the same samples a step
    (a split's micro batch is smaller, its accumulation larger, than the one before).
    group: the process group whose ranks agree (None: the default one where torch.distributed
    is initialised, else this process alone). on_fallback: told each fallback (to record it)."""

    def __init__(
        self,
        splits: Sequence[Split],
        *,
        group: dist.ProcessGroup | None = None,
        on_fallback: Callable[[FellBack], None] | None = None,
    ) -> None:
        if not splits:
            raise ConfigError("an OOM fallback needs at least one split of a step's samples")
        samples = {split.samples for split in splits}
        if len(samples) != 1:
            raise ConfigError(
                f"the fallback's splits must keep a step's samples; they hold {sorted(samples)}"
            )
        if any(b.micro_batch >= a.micro_batch for a, b in zip(splits, splits[1:], strict=False)):
            raise ConfigError("each of the fallback's splits needs a smaller micro batch")
        self.splits = list(splits)
        self.group = group
        self.on_fallback = on_fallback
        self.at = 0  # the split in use: self.splits[self.at]
        self.steps = 0  # optimizer steps finished
        self.fell_back: list[FellBack] = []

    @classmethod
    def from_recommendation(cls, recommendation: Recommendation, **options: Any) -> OOMFallback:
        """The recommended setting's split, then the ranking's settings that differ from it in
        micro batch and accumulation only, with as many samples a step (a smaller micro batch,
        the fastest first), then halvings down to a micro batch of 1 where the ranking has none
        smaller."""
        best = recommendation.best
        if best is None:
            raise ConfigError(f"nothing to fall back from: {recommendation.thin or 'no fit'}")
        splits = [Split(best.spec.batch_size, best.spec.grad_accum)]
        for ranked in recommendation.runners_up:
            split = Split(ranked.spec.batch_size, ranked.spec.grad_accum)
            keeps = split.samples == splits[0].samples  # (the same samples a step)
            if (
                keeps
                and _same_but_split(ranked, best)
                and split.micro_batch < splits[-1].micro_batch
            ):
                splits.append(split)
        while splits[-1].micro_batch > 1:
            last = splits[-1]
            smaller = next(m for m in range(last.micro_batch // 2, 0, -1) if not last.samples % m)
            splits.append(Split(smaller, last.samples // smaller))
        return cls(splits, **options)

    @property
    def split(self) -> Split:
        return self.splits[self.at]

    def step(
        self,
        samples: Any,
        micro_step: Callable[[Any, float], None],
        finish: Callable[[], None],
        discard: Callable[[], None],
    ) -> Split:
        """One optimizer step over this rank's samples (a tensor, a tuple or dict of tensors
        sliced alike, or a list of samples): run at the current split, and again, whole, at the
        next after an OOM on any rank. The split it ran at; OutOfSplits where none fits."""
        total = _length(samples)
        if total != self.split.samples:
            raise ConfigError(
                f"a step of the fallback takes {self.split.samples} samples on each rank, "
                f"not {total}"
            )
        while True:
            failed = self._try(samples, micro_step)
            if not self._any_rank(failed is not None):
                finish()
                self.steps += 1
                return self.split
            # here, outside the except block: its traceback's frames (and the tensors they
            # hold) are gone, so the memory of the failed try can be given back
            discard()
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            self._fall_back(failed or "another rank ran out of memory")

    def _try(self, samples: Any, micro_step: Callable[[Any, float], None]) -> str | None:
        """The step's micro batches, forward and backward; the OOM's first line, if one ran
        out of memory (the rest of the step is not run)."""
        micro = self.split.micro_batch
        total = self.split.samples
        try:
            for start in range(0, total, micro):
                micro_step(_slice(samples, start, start + micro), micro / total)
        except Exception as error:
            oom = ran_out(error)
            if oom is None:
                raise  # (an OOM is data; anything else is the loop's own error)
            return oom[1]
        return None

    def _any_rank(self, failed: bool) -> bool:
        """Whether this rank or any other ran out of memory in this try."""
        if not (dist.is_available() and dist.is_initialized()):
            return failed
        backend = dist.get_backend(self.group)
        device = "cuda" if backend == "nccl" else "cpu"
        flag = torch.tensor([int(failed)], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.group)
        return bool(flag.item())

    def _fall_back(self, message: str) -> None:
        if self.at + 1 >= len(self.splits):
            raise OutOfSplits(
                f"step {self.steps + 1} ran out of memory at every split down to a micro batch "
                f"of {self.split.micro_batch}: {message}"
            )
        was = self.split
        self.at += 1
        fell = FellBack(self.steps + 1, was, self.split, message)
        self.fell_back.append(fell)
        if self.on_fallback is not None:
            self.on_fallback(fell)


def _same_but_split(a: TrialResult, b: TrialResult) -> bool:
    """Two settings that differ in micro batch and accumulation only."""
    return (
        dataclasses.replace(
            a.spec, batch_size=b.spec.batch_size, grad_accum=b.spec.grad_accum
        ).uncapped
        == b.spec.uncapped
    )


def _length(samples: Any) -> int:
    if isinstance(samples, tuple):
        return _length(samples[0])
    if isinstance(samples, dict):
        return _length(next(iter(samples.values())))
    return len(samples)


def _slice(samples: Any, start: int, end: int) -> Any:
    """Samples start to end: of a tuple's or dict's tensors alike, of a tensor or list."""
    if isinstance(samples, tuple):
        return tuple(_slice(part, start, end) for part in samples)
    if isinstance(samples, dict):
        return {key: _slice(part, start, end) for key, part in samples.items()}
    return samples[start:end]
