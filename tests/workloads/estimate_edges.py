"""Workloads at the edges of what the fake step can run: a builder that reads tensor values (as
torchvision's RegNet computes its widths), experts multiplied by torch's grouped matmul in fp32
(as transformers' mixture-of-experts layers are), a forward whose shapes depend on the data,
LayerDrop's draw (as transformers 5.17's BART, OPT and Whisper make it), a router whose experts
are counted by bincount (as transformers 5.17's Mixtral balances its load), an MLP whose
compiled backward recomputes what eager's keeps, a running count over a mask (as
transformers' packed-sequence check makes), layers to checkpoint, a vocabulary-wide
head whose width inductor pads (gpt2's 50257), and a convolution called as a function, in no
nn.Conv2d (as timm's CondConv2d calls F.conv2d with its own weights)."""

import torch
from torch import nn
from torch.nn import functional as F

import advisor

EXPERTS, WIDTH, HIDDEN = 4, 16, 32
grouped_mm = getattr(F, "grouped_mm", None) or torch._grouped_mm


class Layer(nn.Linear):
    """A layer whose code is the model's own (dynamo compiles its frame, as a transformers
    model's decoder layer, where it gives up on the frame calling it)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x)


class WidthsFromValues(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        widths = (torch.arange(1, 3) * 8).tolist()  # values: no meta tensor has them
        self.layers = nn.Sequential(Layer(WIDTH, widths[0]), Layer(widths[0], widths[1]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class Experts(nn.Module):
    """Each token through one expert's two matrices, the tokens sorted by expert."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Parameter(torch.randn(EXPERTS, WIDTH, HIDDEN) / WIDTH**0.5)
        self.down = nn.Parameter(torch.randn(EXPERTS, HIDDEN, WIDTH) / HIDDEN**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0]
        offsets = torch.linspace(rows / EXPERTS, rows, EXPERTS, device=x.device).int()
        return grouped_mm(torch.relu(grouped_mm(x, self.up, offs=offsets)), self.down, offs=offsets)


class DataDependent(WidthsFromValues):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x[x.sum(dim=1) > 0])


class LayerDrop(WidthsFromValues):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            if self.training and torch.rand([]) < 0.0:  # a rate of 0: every layer runs
                continue
            x = layer(x)
        return x


class RouterCounts(nn.Module):
    """Logits over the experts, and the count of tokens routed to each (a load-balancing loss's
    ingredient), by bincount with a minlength: the experts' widths."""

    def __init__(self) -> None:
        super().__init__()
        self.router = nn.Linear(WIDTH, EXPERTS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.router(x)
        chosen = torch.topk(logits, 2, dim=-1).indices.reshape(-1)
        counts = torch.bincount(chosen, minlength=EXPERTS).float()
        return logits * (counts / chosen.numel())  # each expert's logit scaled by its load


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(WIDTH, HIDDEN * 8), nn.Linear(HIDDEN * 8, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.up(x)
        return self.down(hidden * torch.sigmoid(hidden))  # SiLU written out, as models do


class CountedMask(Mlp):
    """A running count over a bool mask, as transformers' packed-sequence check counts its
    position ids' jumps (cumsum of a comparison: a function autocast's emulation looks at)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x * (x > 0).cumsum(-1))


def batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(batch_size, WIDTH, device=device), torch.randint(
        WIDTH, (batch_size,), device=device
    )


def widths_from_values() -> advisor.Workload:
    return advisor.Workload(name="widths_from_values", model=WidthsFromValues, batch=batch)


def experts() -> advisor.Workload:
    return advisor.Workload(name="experts", model=Experts, batch=batch)


def data_dependent() -> advisor.Workload:
    return advisor.Workload(name="data_dependent", model=DataDependent, batch=batch)


def layer_drop() -> advisor.Workload:
    return advisor.Workload(name="layer_drop", model=LayerDrop, batch=batch)


def router_counts() -> advisor.Workload:
    return advisor.Workload(name="router_counts", model=RouterCounts, batch=batch)


def mlp() -> advisor.Workload:
    return advisor.Workload(name="mlp", model=Mlp, batch=batch)


class OddWidth(Mlp):
    """An MLP 1500 wide: a stride inductor pads on a GPU (1500 fp32 elements to 1504)."""

    def __init__(self) -> None:
        nn.Module.__init__(self)
        self.up, self.down = nn.Linear(WIDTH, 1500), nn.Linear(1500, WIDTH)


def odd_width() -> advisor.Workload:
    return advisor.Workload(name="odd_width", model=OddWidth, batch=batch)


def counted_mask() -> advisor.Workload:
    return advisor.Workload(name="counted_mask", model=CountedMask, batch=batch)


def checkpointed_layers() -> advisor.Workload:
    return advisor.Workload(
        name="checkpointed_layers", model=WidthsFromValues, batch=batch, block=Layer
    )


class Head(nn.Linear):
    def __init__(self, width: int) -> None:
        super().__init__(768, width, bias=False)


def wide_head() -> advisor.Workload:
    return advisor.Workload(name="wide_head", model=lambda: Head(50257), batch=head_batch)


def head_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(batch_size, 768, device=device), torch.randint(
        50256, (batch_size,), device=device
    )


class FunctionalConvolution(nn.Module):
    """A 3x3 convolution whose weight is the module's own parameter, called through F.conv2d."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8, 3, 3, 3) / 27**0.5)
        self.head = nn.Linear(8, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.conv2d(x, self.weight, padding=1).mean(dim=(2, 3)))


def functional_convolution_batch(
    batch_size: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(batch_size, 3, 32, 32, device=device), torch.randint(
        WIDTH, (batch_size,), device=device
    )


def functional_convolution() -> advisor.Workload:
    return advisor.Workload(
        name="functional_convolution",
        model=FunctionalConvolution,
        batch=functional_convolution_batch,
    )
