"""The fifth set: convolution nets in the layouts whose cuDNN kernels the estimate's record pins
(channels-last in 16 bits or TF32; kernels as wide as their stride, ViT-style), chosen before
any was measured. The six torchvision nets of ../2026-12-06-cudnn-2d-workspaces (measured there
channels-first only) and ConvNeXt-T, all in channels-last; torchvision's ViT-B/32 and Swin-V2-T,
whose only convolution is the patch kernel. Built from code, trained on random images and
labels with the cross entropy advisor uses for an (images, labels) batch."""

import torch
import torchvision

import advisor


def _images(name: str, build, block: str | None = None) -> advisor.Workload:
    def batch(b: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(b, 3, 224, 224, device=device), torch.randint(1000, (b,), device=device)

    return advisor.Workload(name, build, batch, block=block)


def densenet121() -> advisor.Workload:
    return _images("densenet121", torchvision.models.densenet121, block="_DenseLayer")


def vgg11_bn() -> advisor.Workload:
    return _images("vgg11_bn", torchvision.models.vgg11_bn)


def wide_resnet50_2() -> advisor.Workload:
    return _images("wide_resnet50_2", torchvision.models.wide_resnet50_2, block="Bottleneck")


def resnext50_32x4d() -> advisor.Workload:
    return _images("resnext50_32x4d", torchvision.models.resnext50_32x4d, block="Bottleneck")


def mnasnet1_0() -> advisor.Workload:
    return _images("mnasnet1_0", torchvision.models.mnasnet1_0)


def shufflenet_v2() -> advisor.Workload:
    return _images("shufflenet_v2_x1_0", torchvision.models.shufflenet_v2_x1_0)


def convnext_tiny() -> advisor.Workload:
    return _images("convnext_tiny_tv", torchvision.models.convnext_tiny, block="CNBlock")


def vit_b_32() -> advisor.Workload:
    return _images("vit_b_32", torchvision.models.vit_b_32, block="EncoderBlock")


def swin_v2_t() -> advisor.Workload:
    return _images("swin_v2_t", torchvision.models.swin_v2_t, block="SwinTransformerBlockV2")
