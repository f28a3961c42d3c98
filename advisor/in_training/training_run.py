"""The user's own training, recorded in the history beside the prediction it followed (issue 29):
its peak memory and throughput every `every` optimizer steps, as a trial of kind training that
`advisor compare` shows against the measured trial whose setting it runs.

    with TrainingRun(follows=recommendation, model=model, optimizer=optimizer) as run:
        for batch in loader:
            ...  # one optimizer step: its micro batches, optimizer.step(), zero_grad()
            run.step()

The rate: after `warmup` untimed steps (compilation, cuDNN's autotuning), over windows of
`every` steps bracketed by a synchronisation, samples a step over the median of the windows'
mean step times (the spread: their interquartile range, of window means, not of steps as a
trial's). Memory, on CUDA: the allocator's peaks over the whole run and over the timed steps
(torch's peak counters are reset when the run begins and when timing begins), NVML's
figure for the process, and the parameters, buffers, gradients (their parameters' size) and
optimizer state where the model and optimizer are given; activations are not told apart. Only
the first rank records; a record the database refuses is warned of, never raised into the
training.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
import warnings
from types import TracebackType
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from advisor.errors import ConfigError, StoreError, error_line
from advisor.result import Failure, Kind, Memory, Status, Throughput, TrialResult
from advisor.spec import Device
from advisor.store.store import Store
from advisor.store.training_runs import keep_training
from advisor.trial import device_memory
from advisor.trial.out_of_memory import ran_out
from advisor.trial.worker import environment

if TYPE_CHECKING:
    from advisor.in_training.oom_fallback import FellBack
    from advisor.recommendation import Recommendation

WARMUP_STEPS = 10  # untimed: compilation, cuDNN's autotuning, the allocator's first growth
EVERY = 50  # optimizer steps a record: the rate's windows, and how often the history is written


@dataclasses.dataclass(frozen=True)
class Recording:
    """What a trainer's callback records with: the setting followed, and TrainingRun's every,
    warmup and db_url; the trainer gives the rest when its training begins."""

    follows: Recommendation | TrialResult | int
    every: int = EVERY
    warmup: int = WARMUP_STEPS
    db_url: str | None = None

    def begin(self, **run: Any) -> TrainingRun:
        return TrainingRun(self.follows, every=self.every, warmup=self.warmup,
                           db_url=self.db_url, **run).begin()  # fmt: skip


class TrainingRun:
    """One training run of the user's, recorded as it goes (a context, or begin() and close()).
    follows: the recommendation whose setting it runs, or that setting's measured trial (a
    TrialResult, or its id in the database). batch_size and grad_accum: the run's own (per
    rank), where they differ from the followed setting's."""

    def __init__(
        self,
        follows: Recommendation | TrialResult | int,
        *,
        model: torch.nn.Module | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        batch_size: int | None = None,
        grad_accum: int | None = None,
        every: int = EVERY,
        warmup: int = WARMUP_STEPS,
        db_url: str | None = None,
    ) -> None:
        if every < 1 or warmup < 0:
            raise ConfigError(
                "a training run records every 1 step or more after 0 or more warm-up steps, "
                f"not every={every} after warmup={warmup}"
            )
        self.store = Store(db_url)
        self.followed = _followed(follows, self.store)
        spec = self.followed.spec.uncapped
        self.spec = dataclasses.replace(spec, batch_size=batch_size or spec.batch_size,
                                        grad_accum=grad_accum or spec.grad_accum)  # fmt: skip
        self.model, self.optimizer = model, optimizer
        self.every, self.warmup = every, warmup
        self.recording = not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0
        self.device = torch.device("cuda", torch.cuda.current_device()) if (
            self.spec.device is Device.cuda and torch.cuda.is_available()) else None  # fmt: skip
        # where this run is (the followed trial's device may be one this machine lacks)
        here = self.spec if self.device is not None else dataclasses.replace(
            self.spec, device=Device.cpu)  # fmt: skip
        self.environment = environment(here)
        self.stored: TrialResult | None = None  # the run as last stored
        self._restart()

    def _restart(self) -> None:
        """Timing begins again (a new run's, or a new setting's after a fallback)."""
        self.steps = 0  # optimizer steps of this setting
        self.windows: list[float] = []  # each timed window's mean step time
        self.timed_steps = 0
        self.timed_since: float | None = None
        self.whole_peaks = (0, 0)  # allocated, reserved: before timing began
        self.began = time.perf_counter()
        if self.device is not None:  # (a new setting's peaks are its own)
            torch.cuda.reset_peak_memory_stats(self.device)

    def begin(self) -> TrainingRun:
        self.began = time.perf_counter()
        if self.warmup == 0:
            self._time_from_here()
        return self

    def __enter__(self) -> TrainingRun:
        return self.begin()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(error)

    def step(self) -> None:
        """One optimizer step has finished (all of its micro batches)."""
        self.steps += 1
        if self.steps == self.warmup:
            self._time_from_here()
        elif self.steps > self.warmup and (self.steps - self.warmup) % self.every == 0:
            self._window(self.every)
            self._record()

    def close(self, error: BaseException | None = None) -> TrialResult | None:
        """The run has ended: its last steps counted, and stored as ok, or as the error that
        ended it (an OOM, or crashed). The run as stored (None on the ranks after the first)."""
        done = (self.steps - self.warmup) % self.every if self.steps > self.warmup else 0
        if error is None and done and self.timed_since is not None:
            self._window(done)
        if error is None:
            self._record()
        else:
            oom = ran_out(error) if isinstance(error, Exception) else None
            status = Status.crashed if oom is None else Status.oom
            self._record(status, Failure(message=oom[1] if oom else error_line(error)))
        return self.stored

    def fell_back(self, fell: FellBack) -> None:
        """An OOMFallback's on_fallback: the setting that ran out of memory is stored as an OOM
        of this run, and the run goes on as a new one at the split it fell back to."""
        self.spec = dataclasses.replace(self.spec, batch_size=fell.was.micro_batch,
                                        grad_accum=fell.was.accumulation)  # fmt: skip
        self._record(Status.oom, Failure(message=f"step {fell.step}: {fell.message}"))
        self.spec = dataclasses.replace(self.spec, batch_size=fell.now.micro_batch,
                                        grad_accum=fell.now.accumulation)  # fmt: skip
        self.stored = None
        self._restart()
        self.begin()

    def _time_from_here(self) -> None:
        self._synchronize()
        if self.device is not None:
            self.whole_peaks = (torch.cuda.max_memory_allocated(self.device),
                                torch.cuda.max_memory_reserved(self.device))  # fmt: skip
            torch.cuda.reset_peak_memory_stats(self.device)
        self.timed_since = time.perf_counter()

    def _window(self, steps: int) -> None:
        self._synchronize()
        now = time.perf_counter()
        assert self.timed_since is not None
        self.windows.append((now - self.timed_since) / steps)
        self.timed_steps += steps
        self.timed_since = now

    def _synchronize(self) -> None:
        if self.device is not None:
            torch.cuda.synchronize(self.device)

    def _record(self, status: Status = Status.ok, failure: Failure | None = None) -> None:
        if not self.recording:
            return
        result = TrialResult(  # (one that ended in an error keeps what it had recorded)
            spec=self.spec,
            status=status,
            environment=self.environment,
            memory=self._memory(),
            throughput=self._throughput(),
            failure=failure,
            wall_s=time.perf_counter() - self.began,
            id=self.stored.id if self.stored else None,
            created_at=self.stored.created_at if self.stored else None,
            kind=Kind.training,
            follows=self.followed.id,
        )
        try:
            self.stored = keep_training(self.store, result)
        except StoreError as refused:
            warnings.warn(f"advisor did not record the training run: {refused}", stacklevel=3)

    def _throughput(self) -> Throughput | None:
        if not self.windows:
            return None
        median = statistics.median(self.windows)
        quartiles = statistics.quantiles(self.windows, n=4) if len(self.windows) > 1 else [0, 0, 0]
        samples = self.spec.effective_batch_size  # (a job's: its GPUs', as trials count)
        predicted = self.followed.throughput
        same_gpu = predicted is not None and _device_name(self.followed) == _device_name(None)
        tokens = None  # a sample's tokens, as the followed trial counted them
        if predicted is not None and predicted.tokens_per_s is not None:
            tokens = predicted.tokens_per_s / predicted.samples_per_s * samples / median
        flops = predicted.flops_per_step if predicted and self.spec == self.followed.spec.uncapped \
            else None  # fmt: skip
        mfu = None  # the same FLOPs on the same GPU: the followed trial's MFU at this rate
        if flops and same_gpu and predicted is not None and predicted.mfu is not None:
            mfu = predicted.mfu * predicted.step_s_median / median
        return Throughput(
            samples_per_s=samples / median,
            tokens_per_s=tokens,
            step_s_median=median,
            step_s_iqr=quartiles[2] - quartiles[0],
            timed_steps=self.timed_steps,
            warmup_steps=self.warmup,
            flops_per_step=flops,
            mfu=mfu,
        )

    def _memory(self) -> Memory | None:
        """On CUDA; None on the CPU, whose figures are not the allocator's."""
        if self.device is None:
            return None
        device = self.device
        # torch's peaks since timing began (since the run began, while still warming up)
        now = (torch.cuda.max_memory_allocated(device), torch.cuda.max_memory_reserved(device))
        steady = now if self.timed_since is not None else (0, 0)
        allocated, reserved = max(self.whole_peaks[0], now[0]), max(self.whole_peaks[1], now[1])
        context, nvml = device_memory.context_bytes_of(self.spec, device, None)
        params = list(self.model.parameters()) if self.model is not None else []
        trained = [p for p in params if p.requires_grad]
        buffers = list(self.model.buffers()) if self.model is not None else []
        optimizer = self.optimizer
        return Memory(
            context_bytes=context,
            params_bytes=device_memory.tensor_bytes(params, device),
            buffers_bytes=device_memory.tensor_bytes(buffers, device),
            activations_bytes=0,  # (not told apart in the user's run)
            grads_bytes=device_memory.tensor_bytes(trained, device),
            optimizer_state_bytes=device_memory.optimizer_state_bytes(optimizer, device)
            if optimizer is not None
            else 0,
            inputs_bytes=0,
            peak_allocated_bytes=allocated,
            peak_reserved_bytes=reserved,
            steady_peak_allocated_bytes=steady[0],
            steady_peak_reserved_bytes=steady[1],
            peak_phase=None,
            device_peak_bytes=reserved + context,
            nvml_process_bytes=nvml,
            num_alloc_retries=int(torch.cuda.memory_stats(device).get("num_alloc_retries", 0)),
        )


def _followed(follows: Recommendation | TrialResult | int, store: Store) -> TrialResult:
    """The measured trial a run follows: a recommendation's answer, a trial, or a stored id."""
    if isinstance(follows, int):
        found = store.get(follows)
        if found is None:
            raise ConfigError(f"no trial {follows} is stored in {store.url}; history lists them")
        follows = found
    elif not isinstance(follows, TrialResult):
        if follows.best is None:
            raise ConfigError(f"no setting to follow: {follows.thin or 'nothing measured fits'}")
        follows = follows.best
    if follows.id is None or follows.kind is not Kind.measured or follows.status is not Status.ok:
        raise ConfigError(
            f"a training run follows a stored ok trial that advisor measured; trial "
            f"{follows.id} is {'not stored' if follows.id is None else follows.kind.value}"
            f"{'' if follows.status is Status.ok else ', ' + follows.status.value}"
        )
    return follows


def _device_name(trial: TrialResult | None) -> str | None:
    """The GPU a trial ran on; None: this process's."""
    if trial is not None:
        return trial.environment.device_name if trial.environment else None
    return torch.cuda.get_device_name() if torch.cuda.is_available() else None
