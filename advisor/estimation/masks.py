"""transformers' attention masks, decided on fake tensors as a real run decides them.

A fake tensor counts as traced for transformers (`transformers.utils.import_utils.is_tracing`),
so on the fake step it takes its tracing path: it keeps a packed-sequence mask it cannot check,
builds the causal mask and repeats the key and value heads itself. A real run of an unpacked,
unpadded batch passes no mask (SDPA's `is_causal`) and lets SDPA read grouped-query heads in
place, which CUDA runs on the math path in fp32, keeping the attention matrix: a Llama with 4
key/value heads measured 35% above its tf32 estimate (experiments/2026-12-03-h200-sdpa-choice).
Where a padding mask is given, whether it pads is in its values: a mask made of ones (OPT under
transformers 5.17 makes one itself where none is given; a real run sees it mask nothing and drops
it: 4.9% of OPT bf16's peak allocated) is known by how it was made (KnownOnes); of any other,
transformers' traced answer (the mask) stands.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.multiprocessing.reductions import StorageWeakRef
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary

# how a tensor of ones is made, and what keeps a tensor's values (a cast of ones is ones)
MAKE_ONES = {"ones", "ones_like", "new_ones"}
MAKE_FULL = {"full", "full_like", "new_full"}
KEEP_VALUES = {
    "to", "bool", "long", "int", "float", "half", "bfloat16", "type", "contiguous", "clone",
    "view", "reshape", "expand", "expand_as", "__getitem__", "unsqueeze", "detach", "cuda", "cpu",
}  # fmt: skip


@contextlib.contextmanager
def as_in_a_real_run() -> Iterator[None]:
    """While open, transformers decides its masks on fake tensors as a real run would. Only
    where a transformers model was built (it imports the masks' module): another model's step
    does not pay for importing transformers."""
    masking_utils: Any = sys.modules.get("transformers.masking_utils")
    import_utils: Any = sys.modules.get("transformers.utils.import_utils")
    if masking_utils is None or import_utils is None:
        yield
        return

    skip = getattr(masking_utils, "_ignore_causal_mask_sdpa", None)
    packed = getattr(masking_utils, "find_packed_sequence_indices", None)
    if skip is None or packed is None or not hasattr(import_utils, "is_fake_tensor"):
        yield  # (a transformers that decides elsewhere: its own answer stands)
        return

    def unpacked(position_ids: Any) -> Any:
        # a batch the fake step made packs no sequences (a packed one would keep the mask)
        return None if isinstance(position_ids, FakeTensor) else packed(position_ids)

    ones = KnownOnes()

    def skipped(padding_mask: Any, *args: Any, **kwargs: Any) -> bool:
        traced = torch.compiler.is_compiling()  # (first: dynamo cannot trace the lookup)
        if padding_mask is not None and (traced or not ones.known(padding_mask)):
            return bool(skip(padding_mask, *args, **kwargs))
        padding_mask = None  # (none, or one that masks nothing: the same answer)
        is_fake = import_utils.is_fake_tensor
        import_utils.is_fake_tensor = lambda _: False
        try:
            return bool(skip(padding_mask, *args, **kwargs))
        except Exception:  # a value a fake tensor cannot give (an offset): the traced answer
            return False
        finally:
            import_utils.is_fake_tensor = is_fake

    masking_utils.find_packed_sequence_indices = unpacked
    masking_utils._ignore_causal_mask_sdpa = skipped
    try:
        with ones:
            yield
    finally:
        masking_utils.find_packed_sequence_indices = packed
        masking_utils._ignore_causal_mask_sdpa = skip


class KnownOnes(TorchFunctionMode):
    """The tensors made of ones while it is open, and those taken from them by a cast, a copy or
    a view; one written in place (or whose storage is) is forgotten. Not while dynamo traces:
    there transformers' traced answer is the real run's too."""

    def __init__(self) -> None:
        super().__init__()
        self._ones: WeakIdKeyDictionary = WeakIdKeyDictionary()

    def known(self, tensor: Any) -> bool:
        return tensor in self._ones

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if torch.compiler.is_compiling():
            return result
        name = getattr(func, "__name__", "").split(".")[0]  # (an overload's: "add_.Tensor")
        first = args[0] if args else None
        for written in _written(name, first, kwargs):
            self._forget(written)
        if isinstance(result, torch.Tensor) and _of_ones(name, first, args, kwargs, self):
            self._ones[result] = StorageWeakRef(result.untyped_storage())
        return result

    def _forget(self, written: torch.Tensor) -> None:
        storage = StorageWeakRef(written.untyped_storage())
        for tensor in [t for t, s in self._ones.items() if s == storage]:
            del self._ones[tensor]


def _written(name: str, first: Any, kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors a call writes into: an in-place method's own (a list's, for _foreach_),
    and what `out=` names."""
    written: list[Any] = []
    if (name.endswith("_") and not name.endswith("__")) or name == "__setitem__":
        written.extend(first if isinstance(first, list | tuple) else [first])
    out = kwargs.get("out")
    written.extend(out if isinstance(out, list | tuple) else [out])
    return [t for t in written if isinstance(t, torch.Tensor)]


def _of_ones(name: str, first: Any, args: Any, kwargs: dict[str, Any], ones: KnownOnes) -> bool:
    """Whether the tensor func made is all ones: made so, or kept from a tensor of ones."""
    if name in MAKE_ONES:
        return True
    if name in MAKE_FULL:  # full(size, fill), full_like(t, fill), t.new_full(size, fill)
        at = 2 if name == "new_full" else 1
        fill = args[at] if len(args) > at else kwargs.get("fill_value")
        return isinstance(fill, bool | int | float) and fill == 1
    return name in KEEP_VALUES and ones.known(first)
