"""The convolution layers of torchvision's conv nets as a training step calls them: each
distinct (input shape, weight shape, stride, padding, dilation, groups, bias, whether the input
takes a gradient), found by a forward on the meta device (no GPU, no weights).

    python layers.py            # prints how many distinct layers each list holds
"""

import torch
import torchvision

# the nets the survey reads; the checking set's are others (workloads.py, specs.txt)
SURVEY = ("resnet18", "resnet50", "resnet101", "vgg11_bn", "vgg16_bn", "resnext50_32x4d",
          "wide_resnet50_2", "densenet121", "mnasnet1_0", "shufflenet_v2_x1_0",
          "mobilenet_v2", "efficientnet_b0", "regnet_y_400mf", "googlenet", "alexnet")  # fmt: skip


# as workloads.py builds them (the checking set's inception_v3 at 299 px)
KWARGS = {"googlenet": {"aux_logits": False, "init_weights": False},
          "inception_v3": {"aux_logits": False, "init_weights": False}}  # fmt: skip
SIZES = {"inception_v3": 299}


def layers(net: str, batch: int) -> list[dict]:
    """Each conv2d call of one training step's forward, in order."""
    kwargs, size = KWARGS.get(net, {}), SIZES.get(net, 224)
    model = getattr(torchvision.models, net)(**kwargs).to("meta").train()
    seen: list[dict] = []

    def hook(module: torch.nn.Conv2d, args: tuple, out: torch.Tensor) -> None:
        x = args[0]
        seen.append({
            "x": list(x.shape), "w": list(module.weight.shape), "stride": list(module.stride),
            "padding": list(module.padding), "dilation": list(module.dilation),
            "groups": module.groups, "bias": module.bias is not None,
            "input_grad": x.requires_grad,
        })  # fmt: skip

    for module in model.modules():
        if isinstance(module, torch.nn.Conv2d):
            module.register_forward_hook(hook)
    model(torch.empty(batch, 3, size, size, device="meta"))
    return seen


def distinct(nets: tuple[str, ...], batches: tuple[int, ...]) -> list[dict]:
    return distinct_of([(net, batch) for batch in batches for net in nets])


def distinct_of(pairs: list[tuple[str, int]]) -> list[dict]:
    """The distinct layers of the (net, batch) pairs, each with the pairs it is in."""
    keys: dict[str, dict] = {}
    for net, batch in pairs:
        for layer in layers(net, batch):
            key = repr(sorted(layer.items()))
            keys.setdefault(key, {**layer, "nets": []})["nets"].append(f"{net}@{batch}")
    return list(keys.values())


if __name__ == "__main__":
    for batches in ((32,), (64,), (128,), (32, 64, 128)):
        found = distinct(SURVEY, batches)
        dense = sum(1 for c in found if c["groups"] == 1)
        print(batches, len(found), "distinct,", dense, "dense")
