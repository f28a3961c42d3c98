"""A tiny workload that fills a disk while it is measured: its first step writes the file that
FILL_DISK names until that disk has no space left, as another program might while a trial runs
(the check before measuring passed; the result's write then finds the disk full)."""

import os

import torch
from torch import nn

import advisor


def fill(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        while True:
            os.write(fd, bytes(4096))
    except OSError:  # no space left on the device: done
        pass
    finally:
        os.close(fd)


class FillsDisk(nn.Linear):
    def __init__(self) -> None:
        super().__init__(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # a trial's own step: not the command's check on the meta device, nor a sweep's
        # estimate on fake tensors (a FakeTensor's type is a subclass)
        real = type(x) is torch.Tensor and x.device.type != "meta"
        filler = os.environ.get("FILL_DISK")
        if filler and real and not os.path.exists(filler):
            fill(filler)
        return super().forward(x)


def batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    labels = torch.randint(4, (batch_size,), device=device)
    return torch.randn(batch_size, 16, device=device), labels


def workload() -> advisor.Workload:
    return advisor.Workload(name="fills_disk", model=FillsDisk, batch=batch)
