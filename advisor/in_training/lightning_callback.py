"""The recorder for Lightning's Trainer: a Callback that records the run in the history beside
the measured setting it follows (training_run.TrainingRun, with the Trainer's accumulation).

    trainer = lightning.Trainer(..., callbacks=[AdvisorCallback(follows=recommendation)])
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from advisor.emit.lightning_args import package
from advisor.in_training.training_run import EVERY, WARMUP_STEPS, Recording, TrainingRun
from advisor.result import TrialResult

if TYPE_CHECKING:
    from advisor.recommendation import Recommendation

# Lightning 2.0's package, or the older pytorch_lightning where only it is installed
_LIGHTNING = importlib.import_module("lightning.pytorch" if package() == "lightning" else package())


class AdvisorCallback(_LIGHTNING.Callback):  # type: ignore[name-defined]
    """Records Lightning's run every `every` optimizer steps, after `warmup` (TrainingRun); a
    run that raises is stored as the OOM or crash that ended it."""

    def __init__(
        self,
        follows: Recommendation | TrialResult | int,
        *,
        every: int = EVERY,
        warmup: int = WARMUP_STEPS,
        db_url: str | None = None,
    ) -> None:
        self.recording = Recording(follows, every, warmup, db_url)
        self.run: TrainingRun | None = None
        self.steps = 0  # Lightning's optimizer steps counted so far

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        loader = trainer.train_dataloader
        self.run = self.recording.begin(
            model=pl_module,
            optimizer=trainer.optimizers[0] if trainer.optimizers else None,
            batch_size=getattr(loader, "batch_size", None),
            grad_accum=trainer.accumulate_grad_batches,
        )
        self.steps = trainer.global_step

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        # the micro batch that ended an optimizer step (an epoch's last steps with fewer
        # micro batches too): Lightning's count of them moved
        if self.run is not None and trainer.global_step != self.steps:
            self.steps = trainer.global_step
            self.run.step()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.run is not None:
            self.run.close()
            self.run = None

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        if self.run is not None:
            self.run.close(exception)
            self.run = None
