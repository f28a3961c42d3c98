"""The recorder for transformers' Trainer: a TrainerCallback that records the run in the history
beside the measured setting it follows (training_run.TrainingRun, with the Trainer's batch and
accumulation).

    trainer = Trainer(model=model, args=args, train_dataset=train_dataset,
                      callbacks=[AdvisorCallback(follows=recommendation)])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from advisor.in_training.training_run import EVERY, WARMUP_STEPS, Recording, TrainingRun
from advisor.result import TrialResult

if TYPE_CHECKING:
    from advisor.recommendation import Recommendation


class AdvisorCallback(TrainerCallback):
    """Records the Trainer's run every `every` optimizer steps, after `warmup` (TrainingRun).
    The Trainer calls no callback when training raises: such a run keeps its last record."""

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

    def on_train_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: Any = None,
        optimizer: Any = None,
        **kwargs: Any,
    ) -> None:
        self.run = self.recording.begin(
            model=model,
            optimizer=optimizer,
            batch_size=args.per_device_train_batch_size,
            grad_accum=args.gradient_accumulation_steps,
        )

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self.run is not None:
            self.run.step()

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self.run is not None:
            self.run.close()
            self.run = None
