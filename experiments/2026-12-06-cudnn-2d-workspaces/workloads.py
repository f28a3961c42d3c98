"""torchvision convolution nets no set here had measured, chosen before any was measured: dense
and 1x1 kernels in channels-first (DenseNet, VGG, a wide ResNet), grouped ones (ResNeXt),
depthwise ones (MnasNet, ShuffleNet). Built from code, trained on random images and labels with
the cross entropy advisor uses for a (images, labels) batch."""

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
