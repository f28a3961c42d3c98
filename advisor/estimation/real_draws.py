"""A draw of one random number, made real on the fake step: LayerDrop (BART, OPT and Whisper in
transformers 5.17) compares `torch.rand([])` with its rate in Python, which a fake number cannot
answer ("DataDependentOutputException"), where a real run draws and goes on.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.overrides import TorchFunctionMode


class RealScalarDraws(TorchFunctionMode):
    """torch.rand([]) drawn for real and given as a fake tensor that keeps its value (a constant,
    which fake tensors carry through comparisons), so Python can compare it."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.rand and args in (((),), ([],)) and not kwargs.get("requires_grad"):
            with unset_fake_temporarily():
                drawn = torch.rand([], generator=kwargs.get("generator")).item()
            return torch.tensor(drawn, dtype=kwargs.get("dtype") or torch.get_default_dtype())
        return func(*args, **kwargs)
