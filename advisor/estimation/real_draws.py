"""A draw of one random number, made real on the fake step: LayerDrop (BART, OPT and Whisper in
transformers 5.17) compares `torch.rand([])` with its rate in Python, which a fake number cannot
answer ("DataDependentOutputException"), where a real run draws and goes on. Compiled, the draw
is in the graph dynamo traced (the comparison breaks it there, as on a GPU); the graph's
operator is drawn for real when the graph runs.

Likewise a count of values whose length a fake tensor cannot know: `torch.bincount(x,
minlength=m)` is m long wherever x is below m, as a router's chosen experts are (Mixtral's
load-balancing loss in transformers 5.17), and is given so (CountsWithinMinlength).
"""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import _disable_current_modes

# what torch.rand is in a graph: aten's, or inductor's after its random-number pass
DRAWS = {"aten::rand", "prims::inductor_random"}


class RealScalarDraws(TorchFunctionMode):
    """A draw of one number (torch.rand([])) made for real and given as a fake tensor that keeps
    its value (a constant, which fake tensors carry through comparisons), so Python can compare
    it."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        # (compiling first: dynamo traces this for every call in a compiled model, and need
        # not trace the draw's check; no gain showed within the noise of one compile)
        if not torch.compiler.is_compiling() and _one_draw(func, args, kwargs):
            with _disable_current_modes(), torch._C.DisableTorchFunction():
                drawn = torch.rand([], generator=kwargs.get("generator")).item()
            return torch.tensor(drawn, dtype=kwargs.get("dtype") or torch.get_default_dtype())
        return func(*args, **kwargs)


def _one_draw(func: Any, args: Any, kwargs: Any) -> bool:
    schema = getattr(func, "_schema", None)
    if func is not torch.rand and (schema is None or schema.name not in DRAWS):
        return False
    size = args[0] if args else kwargs.get("size")  # torch.rand(3) and (2, 3): ints, not one
    return isinstance(size, list | tuple) and len(size) == 0 and not kwargs.get("requires_grad")


class CountsWithinMinlength(TorchFunctionMode):
    """`torch.bincount` of a fake tensor with a `minlength`, given `minlength` long: the length
    a real run has wherever the values are below it. Its memory is a few counts; what matters is
    that the step goes on."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.bincount and not torch.compiler.is_compiling():
            values = args[0] if args else kwargs["input"]
            weights = args[1] if len(args) > 1 else kwargs.get("weights")
            minlength = args[2] if len(args) > 2 else kwargs.get("minlength", 0)
            if minlength > 0 and isinstance(values, FakeTensor):
                dtype = torch.int64  # counts; weighted, sums in fp32 or else fp64, as torch's
                if weights is not None:
                    dtype = torch.float32 if weights.dtype is torch.float32 else torch.float64
                return torch.zeros(minlength, dtype=dtype, device=values.device)
        return func(*args, **kwargs)
