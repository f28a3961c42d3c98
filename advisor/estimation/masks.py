"""transformers' attention masks, decided on fake tensors as a real run decides them.

A fake tensor counts as traced for transformers (`transformers.utils.import_utils.is_tracing`),
so on the fake step it takes its tracing path: it keeps a packed-sequence mask it cannot check,
builds the causal mask and repeats the key and value heads itself. A real run of an unpacked,
unpadded batch passes no mask (SDPA's `is_causal`) and lets SDPA read grouped-query heads in
place, which CUDA runs on the math path in fp32, keeping the attention matrix: a Llama with 4
key/value heads measured 35% above its tf32 estimate (experiments/2026-12-03-h200-sdpa-choice).
Where a padding mask is given, whether it pads is in its values: transformers' traced answer
(the mask) stands.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from torch._subclasses.fake_tensor import FakeTensor


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

    def skipped(padding_mask: Any, *args: Any, **kwargs: Any) -> bool:
        if padding_mask is not None:
            return bool(skip(padding_mask, *args, **kwargs))
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
        yield
    finally:
        masking_utils.find_packed_sequence_indices = packed
        masking_utils._ignore_causal_mask_sdpa = skip
