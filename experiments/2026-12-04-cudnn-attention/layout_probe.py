"""What CUDA's scaled_dot_product_attention picks and returns on this GPU for 16-bit queries laid
out two ways (heads-major contiguous, as pythia's rotary embeddings leave them; or a view of a
tokens-major projection, as most models make them), with and without a bool mask and a learned
(requires_grad) float bias: the backend, the output's strides, and the bytes the forward keeps.
No advisor code. Prints one JSON line per case.

    python3 layout_probe.py > probe.jsonl
"""

from __future__ import annotations

import json

import torch
from torch.nn import functional as F

B, H, S, D = 4, 12, 512, 64
# torch._fused_sdp_choice's numbers (torch.nn.attention.SDPBackend)
BACKENDS = {-1: "error", 0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable"}


def case(layout: str, mask: str, dtype: torch.dtype) -> dict:
    torch.cuda.synchronize()
    qkv = torch.randn(B, S, 3, H, D, device="cuda", dtype=dtype, requires_grad=True)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)  # (B, H, S, D) views of a tokens-major projection
    if layout == "heads-major":
        q, k = q.contiguous(), k.contiguous()
    bias = None
    if mask == "bool":
        bias = torch.ones(S, S, dtype=torch.bool, device="cuda").tril()
    elif mask == "learned":
        bias = torch.zeros(1, H, S, S, device="cuda", dtype=dtype, requires_grad=True)
    backend = torch._fused_sdp_choice(q, k, v, bias, 0.0, False)
    before = torch.cuda.memory_allocated()
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    kept = torch.cuda.memory_allocated() - before - out.untyped_storage().nbytes()
    return {
        "layout": layout,
        "mask": mask,
        "dtype": str(dtype).removeprefix("torch."),
        "backend": BACKENDS.get(int(backend), str(backend)),
        "q_strides": list(q.stride()),
        "out_strides": list(out.stride()),
        "kept_bytes": kept,
    }


if __name__ == "__main__":
    print(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}))
    for dtype in (torch.bfloat16, torch.float16):
        for layout in ("tokens-major", "heads-major"):
            for mask in ("none", "bool", "learned"):
                print(json.dumps(case(layout, mask, dtype)), flush=True)
