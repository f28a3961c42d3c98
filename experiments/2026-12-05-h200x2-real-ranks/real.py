"""One real step of a job on the GPUs of one host, as the user would run it: the lines advisor
emits for the setting (emit=torch), executed as printed under torchrun, with a TrainingRun on
rank 0 that stores the run beside the rank trial it followed.

    torchrun --nproc_per_node=N real.py EMITTED.py TRIAL_ID DB_URL MODEL STEPS

MODEL: gpt2 or tiny_mlp (the CPU's dry run). Data is synthetic, of the trial's shapes, made on
each rank's device (each rank its own samples), as advisor's trials make theirs.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
from torch.nn import functional as F

from advisor.in_training.training_run import TrainingRun


def model_and_batch(name: str, batch_size: int, device: torch.device):
    """The model as the catalog builds it, and a micro batch maker."""
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        model = GPT2LMHeadModel(GPT2Config(n_positions=1024, vocab_size=50257))
        model.config.use_cache = False

        def batch() -> dict[str, torch.Tensor]:
            tokens = torch.randint(50257, (batch_size, 1024), device=device)
            return {"input_ids": tokens, "labels": tokens}

        def loss(m: torch.nn.Module, b: dict[str, torch.Tensor]) -> torch.Tensor:
            return m(**b).loss

        return model, batch, loss
    from advisor.models import TinyMLP

    model = TinyMLP(in_features=64, hidden=256, depth=3, num_classes=10)

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(batch_size, 64, device=device), torch.randint(
            10, (batch_size,), device=device
        )

    def loss(m: torch.nn.Module, b: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return F.cross_entropy(m(b[0]), b[1])

    return model, batch, loss


def main(emitted: str, trial: int, db_url: str, name: str, steps: int) -> None:
    with open(emitted) as file:
        text = file.read()
    cuda = "torch.cuda.set_device" in text
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    batch_size = int(text.split("BATCH_SIZE = ")[1].split()[0])
    torch.manual_seed(0)  # every rank the same model, as a user's script builds it
    model, make_batch, loss = model_and_batch(name, batch_size, device)
    names = {"model": model, "compute_loss": loss}
    exec(compile(text, emitted, "exec"), names)
    torch.manual_seed(1 + dist.get_rank())
    accum = names["GRAD_ACCUM"]
    with TrainingRun(trial, model=names["model"], optimizer=names["optimizer"], db_url=db_url,
                     every=20, warmup=10) as run:  # fmt: skip
        for _ in range(steps):
            names["train_step"]([make_batch() for _ in range(accum)])
            run.step()
    if dist.get_rank() == 0 and run.stored is not None:
        print("stored training run", run.stored.id, "following trial", trial, flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]))
