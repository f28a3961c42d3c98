"""PyTorch Lightning's batch-size finder on resnet50 fp32 AdamW under an allocator cap.

    python3 lightning_tuner.py CAP_BYTES

Tuner.scale_batch_size(mode="binsearch") as its documentation shows it: a LightningModule with
a batch_size attribute; defaults otherwise (init_val=2, steps_per_trial=3, max_trials=25).
cudnn.benchmark is on, as in advisor's worker, so both see the same kernels. Prints one JSON
line: the batch it found and the seconds the search took.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
import torchvision

try:
    import lightning.pytorch as pl
    from lightning.pytorch.tuner import Tuner
except ImportError:
    import pytorch_lightning as pl
    from pytorch_lightning.tuner import Tuner


class Images(torch.utils.data.Dataset):
    """Random images, one tensor shared by every index, so loading costs nothing."""

    def __init__(self) -> None:
        self.image = torch.randn(3, 224, 224)

    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, i: int):
        return self.image, i % 1000


class ResNet50(pl.LightningModule):
    def __init__(self, batch_size: int = 2) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.model = torchvision.models.resnet50()

    def training_step(self, batch, index):
        images, labels = batch
        return F.cross_entropy(self.model(images), labels)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)

    def train_dataloader(self):
        return torch.utils.data.DataLoader(Images(), batch_size=self.batch_size)


def main() -> None:
    cap = int(sys.argv[1])
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(cap / total, 0)
    with tempfile.TemporaryDirectory() as root:
        trainer = pl.Trainer(
            accelerator="gpu", devices=1, precision="32-true", max_epochs=1, benchmark=True,
            logger=False, enable_checkpointing=False, enable_progress_bar=False,
            enable_model_summary=False, default_root_dir=root,
        )  # fmt: skip
        started = time.perf_counter()
        found = Tuner(trainer).scale_batch_size(ResNet50(), mode="binsearch")
        seconds = time.perf_counter() - started
    print(json.dumps({
        "found_batch": found, "seconds": seconds, "cap_bytes": cap,
        "lightning": pl.__version__, "torch": torch.__version__,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
