"""The recorders of transformers' Trainer and Lightning's (issue 29, item 3): each trains a tiny
model with the emitted setting on the CPU and stores the run beside the trial it followed, with
the Trainer's own batch and accumulation and every optimizer step counted once."""

from __future__ import annotations

import pytest
import torch
from conftest import spec_of
from fake_backend import fake_result
from torch import nn
from torch.nn import functional as F

from advisor.emit.trainers import trainer_config
from advisor.queries import history
from advisor.result import Kind, Status
from advisor.store.store import Store

STEPS, EVERY, WARMUP = 12, 4, 2  # timed: steps 3-10 in two windows, then 11-12 at the end


def stored_trial(db_url: str, *overrides: str) -> int:
    stored = Store(db_url).add(fake_result(spec_of(*overrides)))
    assert stored.id is not None
    return stored.id


def test_the_transformers_callback_records_the_trainers_run(db_url, tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from advisor.in_training.transformers_callback import AdvisorCallback

    setting = ("model=tiny_gpt2", "batch_size=2", "grad_accum=2", "precision=fp32")
    trial = stored_trial(db_url, *setting)
    emitted = trainer_config(spec_of(*setting), "hf")
    args = TrainingArguments(**emitted.arguments, output_dir=str(tmp_path), max_steps=STEPS,
                             report_to=[], save_strategy="no")  # fmt: skip
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1,
                                       n_head=2))  # fmt: skip
    tokens = torch.randint(64, (64, 8))
    dataset = [{"input_ids": t, "labels": t} for t in tokens]
    callback = AdvisorCallback(trial, every=EVERY, warmup=WARMUP, db_url=db_url)
    trainer = Trainer(model=model, args=args, train_dataset=dataset, callbacks=[callback])
    trainer.train()
    (run,) = history(db_url=db_url, kind="training")
    assert (run.kind, run.follows, run.status) == (Kind.training, trial, Status.ok)
    assert (run.spec.batch_size, run.spec.grad_accum) == (2, 2)  # the Trainer's, as emitted
    assert (run.throughput.timed_steps, run.throughput.warmup_steps) == (STEPS - WARMUP, WARMUP)
    assert run.throughput.samples_per_s == pytest.approx(4 / run.throughput.step_s_median)


def classifier(fail_at: int | None = None):
    import lightning

    class Classifier(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = nn.Linear(32, 4)

        def training_step(self, batch, index: int) -> torch.Tensor:
            if index == fail_at:
                raise RuntimeError("a batch the loop cannot take")
            x, y = batch
            return F.cross_entropy(self.model(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Classifier()


def lightning_fit(db_url: str, trial: int, module, emitted, samples: int = 512) -> None:
    import lightning
    from torch.utils.data import DataLoader, TensorDataset

    from advisor.in_training.lightning_callback import AdvisorCallback

    data = TensorDataset(torch.randn(samples, 32), torch.randint(4, (samples,)))
    callback = AdvisorCallback(trial, every=EVERY, warmup=WARMUP, db_url=db_url)
    trainer = lightning.Trainer(**emitted.arguments, max_steps=STEPS, callbacks=[callback],
                                logger=False, enable_checkpointing=False,
                                enable_progress_bar=False, enable_model_summary=False)  # fmt: skip
    trainer.fit(module, DataLoader(data, batch_size=4))


def test_the_lightning_callback_records_the_trainers_run(db_url):
    setting = ("model=tiny_mlp", "batch_size=4", "grad_accum=2", "precision=fp32",
               "optimizer=sgd")  # fmt: skip
    trial = stored_trial(db_url, *setting)
    emitted = trainer_config(spec_of(*setting), "lightning")
    assert emitted.arguments["accumulate_grad_batches"] == 2
    lightning_fit(db_url, trial, classifier(), emitted)
    (run,) = history(db_url=db_url, kind="training")
    assert (run.kind, run.follows, run.status) == (Kind.training, trial, Status.ok)
    assert (run.spec.batch_size, run.spec.grad_accum) == (4, 2)  # the loader's, the Trainer's
    # an optimizer step is two of Lightning's batches: each counted once
    assert (run.throughput.timed_steps, run.throughput.warmup_steps) == (STEPS - WARMUP, WARMUP)
    assert run.throughput.samples_per_s == pytest.approx(8 / run.throughput.step_s_median)

    with pytest.raises(RuntimeError, match="a batch the loop cannot take"):
        lightning_fit(db_url, trial, classifier(fail_at=13), emitted)
    _, crashed = history(db_url=db_url, kind="training")[::-1]
    assert crashed.status is Status.crashed
    assert crashed.failure.message == "RuntimeError: a batch the loop cannot take"


def test_lightnings_short_last_step_of_an_epoch_is_counted(db_url):
    """10 batches an epoch, 3 a step: Lightning steps after batches 3, 6, 9 and the epoch's
    last (one batch); each of the 12 steps counts once."""
    setting = ("model=tiny_mlp", "batch_size=4", "grad_accum=3", "precision=fp32",
               "optimizer=sgd")  # fmt: skip
    trial = stored_trial(db_url, *setting)
    emitted = trainer_config(spec_of(*setting), "lightning")
    lightning_fit(db_url, trial, classifier(), emitted, samples=40)
    (run,) = history(db_url=db_url, kind="training")
    assert (run.throughput.timed_steps, run.throughput.warmup_steps) == (STEPS - WARMUP, WARMUP)
