"""A sixth set, compiled: torchvision convolution nets no set had measured compiled (the catalog's
compiled specs are resnet50 and gpt2; the held-out ones, 12 other models), chosen before any
was measured, to check the compiled estimate where inductor's batch-norm kernels and cuDNN's
depthwise workspaces decide (../2026-12-07-depthwise-workspaces, ../2026-12-07-fused-into-reader).
Built from code, trained on random images and labels with the cross entropy advisor uses for an
(images, labels) batch."""

import torch
import torchvision

import advisor


def _images(name: str, build, block: str | None = None) -> advisor.Workload:
    def batch(b: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(b, 3, 224, 224, device=device), torch.randint(1000, (b,), device=device)

    return advisor.Workload(name, build, batch, block=block)


def mobilenet_v3_large() -> advisor.Workload:
    return _images("mobilenet_v3_large", torchvision.models.mobilenet_v3_large)


def convnext_tiny() -> advisor.Workload:
    return _images("convnext_tiny_tv", torchvision.models.convnext_tiny, block="CNBlock")


def regnet_y_800mf() -> advisor.Workload:
    return _images("regnet_y_800mf", torchvision.models.regnet_y_800mf)


def mnasnet1_0() -> advisor.Workload:
    return _images("mnasnet1_0", torchvision.models.mnasnet1_0)


def shufflenet_v2() -> advisor.Workload:
    return _images("shufflenet_v2_x1_0", torchvision.models.shufflenet_v2_x1_0)


def densenet121() -> advisor.Workload:
    return _images("densenet121", torchvision.models.densenet121, block="_DenseLayer")


def resnext50_32x4d() -> advisor.Workload:
    return _images("resnext50_32x4d", torchvision.models.resnext50_32x4d, block="Bottleneck")


def efficientnet_v2_s() -> advisor.Workload:
    return _images("efficientnet_v2_s_tv", torchvision.models.efficientnet_v2_s)
