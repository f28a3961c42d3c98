"""Whether a spec can fit, judged without running it from what a sweep has measured: a smaller
batch of the same setting that did not fit, the family's memory line, a crash of the same
setting, or (before a line exists) the fake-tensor estimate; and the largest micro batch each
family is predicted to fit, which the sweep climbs to."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol

from advisor import gpus
from advisor.errors import EstimateError
from advisor.estimation.memory_line import AffineFit, family_key, fit
from advisor.result import Status, TrialResult
from advisor.search.steps import Settled
from advisor.spec import TrialSpec
from advisor.target import Target

CLEARLY_OVER = 0.03  # skip a spec when the memory line puts it this far over, beyond its error
CLEARLY_OVER_ESTIMATE = 0.15  # ... or this far by the fake-tensor estimate, when no line exists
# yet (on the H200 it over-states the steady device peak by 10.1% at worst uncalibrated, 14.6%
# calibrated: experiments/2026-11-30-estimate)


class MemoryEstimate(Protocol):
    """What a spec needs of the device without running it (advisor estimate), calibrated on what
    has been measured."""

    def device_peak(self, spec: TrialSpec, measured: Sequence[TrialResult]) -> int: ...

    def largest_batch(
        self, spec: TrialSpec, target: Target, measured: Sequence[TrialResult]
    ) -> int | None: ...


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A spec judged not to fit (or not to run) without running it."""

    settled: Settled  # oom_monotone, memory_model, crash_family or estimate
    reason: str


class Feasibility:
    def __init__(
        self, target: Target, estimate: MemoryEstimate | None, results: dict[str, TrialResult]
    ) -> None:
        self.target, self.estimate = target, estimate
        self.results = results  # the sweep's, by spec hash (read, never written here)
        # the largest micro batch predicted to fit, by family: the estimate calibrated on what
        # was measured, else the family's memory line
        self.largest_batches: dict[str, tuple[TrialSpec, int, str]] = {}

    def verdict(self, spec: TrialSpec) -> Verdict | None:
        """Why the spec need not run, or None: it must be measured."""
        verdict = self.ruled_out(spec) or self.crashed(spec)
        if verdict is not None:
            return verdict
        if self.line(family_key(spec)) is not None or self.estimate is None:
            return None
        # No line for this family yet: ask the estimate. A compiled spec's own estimate
        # compiles the model on fake tensors (10-60 s a step, several steps), too slow for a
        # sweep's pace; inductor can keep far fewer activations than eager (gpt2 b32 on the
        # H200: 30.1 GiB compiled, 55 eager; experiments/2026-11-30-h200-sweep-capped) or about
        # as many (resnet50 bf16 b2048: 99.5 and 97.3 GiB; 2026-12-01-h200-sweep-fast): a
        # compiled spec is judged by the eager estimate times the least compiled/eager ratio
        # measured, and not before one is.
        ratio = 1.0 if not spec.compile else self._compiled_ratio()
        if ratio is None:
            return None
        eager = dataclasses.replace(spec, compile=False)
        try:
            estimated = int(self.estimate.device_peak(eager, list(self.results.values())) * ratio)
        except EstimateError:  # a step fake tensors cannot run: measured instead
            return None
        if self.target.excess(estimated) > CLEARLY_OVER_ESTIMATE:
            reason = f"estimated at {gpus.size_text(estimated)} without running"
            if spec.compile:
                reason += f" (eager estimate x {ratio:.2f}, as compiled measured against eager)"
            return Verdict(Settled.estimate, reason)
        return None

    def _compiled_ratio(self) -> float | None:
        """The least device peak of a compiled spec over its eager twin, both measured ok."""
        ratios = []
        for r in self.results.values():
            if not r.spec.compile or r.memory is None or r.status is not Status.ok:
                continue
            twin = self.results.get(dataclasses.replace(r.spec, compile=False).hash)
            if twin is not None and twin.memory is not None and twin.status is Status.ok:
                ratios.append(r.memory.device_peak_bytes / twin.memory.device_peak_bytes)
        return min(ratios, default=None)

    def ruled_out(self, spec: TrialSpec) -> Verdict | None:
        """Infeasible by what was measured: a smaller batch that did not fit, or the line."""
        family = family_key(spec)
        for other in self.results.values():
            if (
                family_key(other.spec) == family
                and other.spec.batch_size <= spec.batch_size
                and self._over(other)
            ):
                reason = f"batch {other.spec.batch_size} of the same setting did not fit"
                return Verdict(Settled.oom_monotone, reason)
        line = self.line(family)
        # A line through one batch rules nothing out: its slope takes in what does not grow
        # with the batch (cuDNN's first-step workspaces: resnet50 b32 on the H200 drew 229 GiB
        # at b1024, which took 101; experiments/2026-12-01-h200-sweep-fast).
        if line is not None and line.points > 1:
            predicted = line.peak(spec.batch_size) + line.max_residual_bytes
            if self.target.excess(predicted) > CLEARLY_OVER:
                reason = f"memory line predicts {gpus.size_text(predicted)}"
                return Verdict(Settled.memory_model, reason)
        return None

    def crashed(self, spec: TrialSpec) -> Verdict | None:
        """A setting that crashed at one batch crashes at the others: what fails is the code
        path, not the memory (on the H200, gpt2 compiled with checkpointing crashed at every
        batch; experiments/2026-11-30-h200-sweep-capped). Not a timeout, which can be the
        batch's."""
        family = family_key(spec)
        for other in self.results.values():
            if family_key(other.spec) == family and other.status is Status.crashed:
                reason = f"crashed at batch {other.spec.batch_size} with the same other knobs"
                return Verdict(Settled.crash_family, reason)
        return None

    def largest_batch(self, spec: TrialSpec) -> int | None:
        """The family's largest micro batch predicted to fit: by the estimate, calibrated on the
        measured points (the allocator's model under the target's limit: it gives its cache back
        near the limit, which a line through uncapped peaks cannot know), else by the line."""
        family = family_key(spec)
        if self.estimate is not None:
            measured = list(self.results.values())
            try:
                largest = self.estimate.largest_batch(spec, self.target, measured)
            except EstimateError:  # a step fake tensors cannot run: the line's answer
                largest = None
            if largest is not None:
                self.largest_batches[family] = (spec, largest, "estimate")
                return largest
        line = self.line(family)
        if line is None:
            return None
        self.largest_batches[family] = (spec, line.largest_batch(self.target.allowed_bytes), "line")
        return self.largest_batches[family][1]

    def next_batch(
        self, spec: TrialSpec, tried: Sequence[tuple[int, bool]], batch_sizes: Sequence[int]
    ) -> int | None:
        """The climb: the next batch of the spec's setting worth measuring, given the batches
        of it tried (batch, whether it fit). Up from the largest that fit, to the largest
        predicted to fit (the estimate calibrated on what was measured, else the line; with
        neither, the next up); or, below a batch that did not fit, as far down as predicted.
        None once the two bounds meet."""
        low = max((b for b, fit in tried if fit), default=0)
        high = min((b for b, fit in tried if not fit and b > low), default=None)
        between = [b for b in batch_sizes if b > low and (high is None or b < high)]
        if not between:
            return None
        largest = self.largest_batch(spec)
        if largest is None:  # nothing predicts: one step up from what fit, or down from what failed
            return min(between) if low or high is None else max(between)
        below = [b for b in between if b <= largest]
        return max(below) if below else None

    def climb_ended(
        self, spec: TrialSpec, tried: Sequence[tuple[int, bool]], batch_sizes: Sequence[int]
    ) -> bool:
        """Whether the spec's batch is where its setting's climb ended: the largest that fit,
        with no batch above it left that is predicted to fit and not known to fail."""
        if any(fit and b > spec.batch_size for b, fit in tried):
            return False
        ceiling = min((b for b, fit in tried if not fit and b > spec.batch_size), default=None)
        above = [
            b for b in batch_sizes if b > spec.batch_size and (ceiling is None or b < ceiling)
        ]  # fmt: skip
        if not above:
            return True
        predicted = self.largest_batches.get(family_key(spec))
        return predicted is not None and predicted[1] < min(above)

    def line(self, family: str) -> AffineFit | None:
        measured = [
            r
            for r in self.results.values()
            if family_key(r.spec) == family and r.status is Status.ok and r.memory is not None
        ]
        points, fixed = [], None
        for r in measured:
            assert r.memory is not None
            points.append((r.spec.batch_size, r.memory.device_peak_bytes))
            m = r.memory
            fixed = m.context_bytes + m.params_bytes + m.buffers_bytes + m.grads_bytes
            fixed += m.optimizer_state_bytes
        return fit(points, fixed)

    def _over(self, result: TrialResult) -> bool:
        return result.status is Status.oom or (
            result.status is Status.ok and not self.target.fits(result)
        )
