"""Issue 29, item 3 on the H200: advisor measures settings of gpt2 and resnet50, recommends the
fastest, emits it for transformers' Trainer (gpt2) and Lightning (resnet50); each trainer then
trains with the emitted configuration, executed as printed, and its advisor callback stores the
run beside the trial it followed. Each part runs in a process of its own:

    python train.py measure DB_URL      # advisor.run: 3 settings of each model
    python train.py hf DB_URL           # gpt2 with transformers' Trainer, as emitted
    python train.py lightning DB_URL    # resnet50 with Lightning, as emitted
    python train.py summary DB_URL      # each run against its prediction, as JSON

Data is synthetic, of the catalog's shapes (gpt2: 1,024 random tokens a sample, its labels the
same tokens; resnet50: 224x224 images, 1,000 classes), as advisor's trials use. The images live
on the GPU, one batch's worth indexed round and round (a loader from host memory would time the
copy, which advisor's trial does not make); the tokens are on the host, and the Trainer moves
them (a few hundred KiB a step).
"""

from __future__ import annotations

import json
import sys

import torch

import advisor
from advisor.result import Kind

GPT2 = [{"batch_size": b, "precision": "bf16", "optimizer": "adamw_fused"} for b in (4, 8, 16)]
RESNET = [{"batch_size": b, "precision": "bf16", "optimizer": "sgd_momentum",
           "channels_last": True} for b in (64, 128, 256)]  # fmt: skip
WARMUP, EVERY = 20, 20  # the callbacks' untimed steps, and the steps of each timed window
HF_STEPS, LIGHTNING_STEPS = 220, 320


def measure(db_url: str) -> None:
    for model, settings in (("gpt2", GPT2), ("resnet50", RESNET)):
        for setting in settings:
            result = advisor.run(model=model, db_url=db_url, **setting)
            print(model, setting, result.status.value, round(result.samples_per_s, 1), flush=True)


def run_emitted(text: str, **names: object) -> dict:
    """The emitted configuration, executed as the user's script runs it."""
    namespace = dict(names)
    exec(compile(text, "<emitted>", "exec"), namespace)
    return namespace


def hf(db_url: str) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    from advisor.in_training.transformers_callback import AdvisorCallback

    recommendation = advisor.recommend(model="gpt2", db_url=db_url)
    emitted = recommendation.emit("hf")
    print(emitted.text)
    config = GPT2Config(n_positions=1024, vocab_size=50257)
    config.use_cache = False
    model = GPT2LMHeadModel(config)
    tokens = torch.randint(50257, (HF_STEPS * emitted.arguments["per_device_train_batch_size"]
                                   * emitted.arguments["gradient_accumulation_steps"], 1024))  # fmt: skip
    dataset = [{"input_ids": t, "labels": t} for t in tokens]
    ran = run_emitted(emitted.text, model=model, train_dataset=dataset)
    trainer = ran["trainer"]
    trainer.args.max_steps = HF_STEPS
    trainer.args.report_to = []
    trainer.args.save_strategy = "no"
    trainer.add_callback(AdvisorCallback(recommendation, every=EVERY, warmup=WARMUP,
                                         db_url=db_url))  # fmt: skip
    trainer.train()


class Images(torch.utils.data.Dataset):
    """One batch's images and labels on the GPU, indexed round and round."""

    def __init__(self, batch: int, length: int) -> None:
        self.images = torch.randn(batch, 3, 224, 224, device="cuda")
        self.labels = torch.randint(1000, (batch,), device="cuda")
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.images[i % len(self.images)], self.labels[i % len(self.labels)]


def lightning_run(db_url: str) -> None:
    import lightning
    import torchvision

    from advisor.in_training.lightning_callback import AdvisorCallback

    recommendation = advisor.recommend(model="resnet50", db_url=db_url)
    emitted = recommendation.emit("lightning")
    print(emitted.text)
    batch = recommendation.best.spec.batch_size
    accumulation = recommendation.best.spec.grad_accum
    dataset = Images(batch, LIGHTNING_STEPS * batch * accumulation)
    ran = run_emitted(emitted.text, model=torchvision.models.resnet50(num_classes=1000),
                      train_dataset=dataset)  # fmt: skip

    class Classifier(lightning.LightningModule):
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def training_step(self, batch, index: int) -> torch.Tensor:
            x, y = batch
            x = x.contiguous(memory_format=torch.channels_last)  # as the emitted comment says
            return torch.nn.functional.cross_entropy(self.model(x), y)

    Classifier.configure_optimizers = ran["configure_optimizers"]
    trainer = ran["trainer"]
    trainer.fit_loop.epoch_loop.max_steps = LIGHTNING_STEPS  # (the emitted Trainer has none)
    trainer.callbacks.append(AdvisorCallback(recommendation, every=EVERY, warmup=WARMUP,
                                             db_url=db_url))  # fmt: skip
    trainer.fit(Classifier(ran["model"]), ran["train_loader"])


def summary(db_url: str) -> None:
    runs = advisor.history(db_url=db_url, kind="training")
    said = []
    for run in runs:
        (measured,) = [r for r in advisor.history(db_url=db_url) if r.id == run.follows]
        assert measured.kind is Kind.measured
        figures = {
            "samples_per_s": (run.samples_per_s, measured.samples_per_s),
            **{name: (getattr(run.memory, name), getattr(measured.memory, name))
               for name in ("peak_allocated_bytes", "peak_reserved_bytes",
                            "steady_peak_allocated_bytes", "device_peak_bytes")},
        }  # fmt: skip
        said.append({
            "run": run.id, "followed": measured.id, "model": run.spec.model.name,
            "setting": run.to_dict()["spec"], "run_spread": run.throughput.spread,
            "timed_steps": run.throughput.timed_steps,
            "figures": {k: {"run": a, "measured": b, "ratio": a / b} for k, (a, b) in
                        figures.items()},
        })  # fmt: skip
    print(json.dumps(said, indent=2))


if __name__ == "__main__":
    part, db_url = sys.argv[1], sys.argv[2]
    {"measure": measure, "hf": hf, "lightning": lightning_run, "summary": summary}[part](db_url)
