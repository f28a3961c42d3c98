"""The checking set: channels-first conv nets the survey did not read (layers.py's SURVEY), at
batches it did not probe, chosen before any was measured: torchvision's resnet152, vgg13_bn,
regnet_x_1_6gf, efficientnet_b2, inception_v3 (299 px), resnet34, densenet169,
mobilenet_v3_large, resnext101_32x8d, squeezenet1_1 and vgg11 (no batch norm). Built from code,
trained on random images and labels with the cross entropy advisor uses for an (images, labels)
batch."""

import functools

import torch
import torchvision

import advisor


def _images(name: str, build, block: str | None = None, size: int = 224) -> advisor.Workload:
    def batch(b: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        images = torch.randn(b, 3, size, size, device=device)
        return images, torch.randint(1000, (b,), device=device)

    return advisor.Workload(name, build, batch, block=block)


def resnet152() -> advisor.Workload:
    return _images("resnet152", torchvision.models.resnet152, block="Bottleneck")


def vgg13_bn() -> advisor.Workload:
    return _images("vgg13_bn", torchvision.models.vgg13_bn)


def regnet_x_1_6gf() -> advisor.Workload:
    return _images("regnet_x_1_6gf", torchvision.models.regnet_x_1_6gf, block="ResBottleneckBlock")


def efficientnet_b2() -> advisor.Workload:
    return _images("efficientnet_b2", torchvision.models.efficientnet_b2, block="MBConv")


def inception_v3() -> advisor.Workload:
    build = functools.partial(torchvision.models.inception_v3, aux_logits=False, init_weights=False)
    return _images("inception_v3", build, size=299)


def resnet34() -> advisor.Workload:
    return _images("resnet34", torchvision.models.resnet34, block="BasicBlock")


def densenet169() -> advisor.Workload:
    return _images("densenet169", torchvision.models.densenet169, block="_DenseLayer")


def mobilenet_v3_large() -> advisor.Workload:
    return _images("mobilenet_v3_large", torchvision.models.mobilenet_v3_large)


def resnext101_32x8d() -> advisor.Workload:
    return _images("resnext101_32x8d", torchvision.models.resnext101_32x8d, block="Bottleneck")


def squeezenet1_1() -> advisor.Workload:
    return _images("squeezenet1_1", torchvision.models.squeezenet1_1)


def vgg11() -> advisor.Workload:
    return _images("vgg11", torchvision.models.vgg11)
