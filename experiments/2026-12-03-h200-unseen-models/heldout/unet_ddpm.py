"""A diffusion UNet as diffusers trains one (DDPM's 64-pixel model shape) from its config (no
download): residual blocks with group norm, self-attention at two resolutions, a timestep
embedding; the loss is the noise prediction's mean squared error."""

import torch
from diffusers import UNet2DModel
from torch.nn import functional as F

import advisor

SIZE = 64


def build() -> UNet2DModel:
    return UNet2DModel(
        sample_size=SIZE, in_channels=3, out_channels=3, layers_per_block=2,
        block_out_channels=(128, 128, 256, 256, 512, 512),
        down_block_types=("DownBlock2D", "DownBlock2D", "DownBlock2D", "DownBlock2D",
                          "AttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "AttnUpBlock2D", "UpBlock2D", "UpBlock2D", "UpBlock2D",
                        "UpBlock2D"),
    )  # fmt: skip


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    return {
        "noisy": torch.randn(batch_size, 3, SIZE, SIZE, device=device),
        "noise": torch.randn(batch_size, 3, SIZE, SIZE, device=device),
        "timesteps": torch.randint(1000, (batch_size,), device=device),
    }


def loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    predicted = model(batch["noisy"], batch["timesteps"]).sample
    return F.mse_loss(predicted.float(), batch["noise"])


def workload() -> advisor.Workload:
    return advisor.Workload("diffusers_unet_ddpm64", build, batch, loss, block="ResnetBlock2D")
