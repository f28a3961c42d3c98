"""Issue 29's open gap on the H200: gpt2 trained by transformers' Trainer with the settings
`emit=hf` printed ran 11.6% under the samples/s advisor measured for them
(../2026-12-04-h200-training-runs). Three suspects: the Trainer clips gradients
(`max_grad_norm=1.0`, its default, which the emitted arguments leave), it copies host tokens to
the GPU each step (a synchronising copy; the trial's batch is made on the GPU), and its own
per-step work. Each variant below changes one of them and trains in a process of its own:

    python gap.py measure DB_URL             # advisor.run: gpt2 b16 bf16 adamw_fused
    python gap.py VARIANT DB_URL             # emitted | no_clip | gpu_tokens | both |
                                             # nan_check | lean
    python gap.py summary DB_URL             # each run against the trial, as JSON

Public API only; data synthetic, of the catalog's shapes (1,024 random tokens a sample, its
labels the same tokens), as in ../2026-12-04-h200-training-runs/train.py.
"""

from __future__ import annotations

import json
import sys

import torch

import advisor

SETTING = {"model": "gpt2", "batch_size": 16, "precision": "bf16", "optimizer": "adamw_fused"}
WARMUP, EVERY, STEPS = 20, 20, 220
VARIANTS = {  # name: (clip gradients, tokens on the GPU, the Trainer's nan/inf check of the
    # loss: True or False, None as emitted). `logging_nan_inf_filter`, True by default, makes
    # the Trainer ask the GPU whether each step's loss is nan or inf: a wait every step. The
    # first call's code emitted nothing for it (on); the second call's emits it False.
    "emitted": (True, False, None),
    "no_clip": (False, False, None),
    "gpu_tokens": (True, True, None),
    "both": (False, True, None),
    "nan_check": (True, False, True),
    "lean": (False, True, False),
}


def measure(db_url: str) -> None:
    result = advisor.run(db_url=db_url, **SETTING)
    print(result.status.value, round(result.samples_per_s, 1), flush=True)


def train(variant: str, db_url: str) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    from advisor.in_training.transformers_callback import AdvisorCallback

    clip, on_gpu, nan_check = VARIANTS[variant]
    recommendation = advisor.recommend(model="gpt2", db_url=db_url)
    emitted = recommendation.emit("hf")
    print(emitted.text)
    config = GPT2Config(n_positions=1024, vocab_size=50257)
    config.use_cache = False
    model = GPT2LMHeadModel(config)
    batch = emitted.arguments["per_device_train_batch_size"]
    tokens = torch.randint(50257, (STEPS * batch * emitted.arguments["gradient_accumulation_steps"],
                                   1024), device="cuda" if on_gpu else "cpu")  # fmt: skip
    dataset = [{"input_ids": t, "labels": t} for t in tokens]
    namespace = {"model": model, "train_dataset": dataset}
    exec(compile(emitted.text, "<emitted>", "exec"), namespace)  # as the user's script runs it
    trainer = namespace["trainer"]
    trainer.args.max_steps = STEPS
    trainer.args.report_to = []
    trainer.args.save_strategy = "no"
    if not clip:
        trainer.args.max_grad_norm = 0.0  # (the Trainer clips only above 0)
    if on_gpu:
        trainer.args.dataloader_pin_memory = False  # (CUDA tensors cannot be pinned)
    if nan_check is not None:
        trainer.args.logging_nan_inf_filter = nan_check
    print(variant, "max_grad_norm", trainer.args.max_grad_norm, "tokens on", tokens.device,
          "logging_nan_inf_filter", trainer.args.logging_nan_inf_filter)  # fmt: skip
    trainer.add_callback(AdvisorCallback(recommendation, every=EVERY, warmup=WARMUP,
                                         db_url=db_url))  # fmt: skip
    trainer.train()


def summary(db_url: str) -> None:
    (measured,) = advisor.history(db_url=db_url, kind="measured")
    runs = advisor.history(db_url=db_url, kind="training")
    said = [{"run": run.id, "followed": run.follows, "samples_per_s": run.samples_per_s,
             "ratio": run.samples_per_s / measured.samples_per_s,
             "run_spread": run.throughput.spread, "timed_steps": run.throughput.timed_steps,
             "peak_allocated_ratio": run.memory.peak_allocated_bytes
             / measured.memory.peak_allocated_bytes} for run in runs]  # fmt: skip
    print(json.dumps({"measured": measured.samples_per_s, "runs": said}, indent=2))


if __name__ == "__main__":
    part, db_url = sys.argv[1], sys.argv[2]
    if part in VARIANTS:
        train(part, db_url)
    else:
        {"measure": measure, "summary": summary}[part](db_url)
