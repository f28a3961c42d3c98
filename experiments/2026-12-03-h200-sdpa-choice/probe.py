"""Which attention kernel torch's dispatcher picks for scaled_dot_product_attention, and what it
keeps for backward, by dtype, head size, grouped-query heads, mask and dropout: on the GPU (the
truth the estimate must emulate) or on the CPU (what fake tensors would run). Prints one JSON
line per case. From the repository root:
    python experiments/2026-12-03-h200-sdpa-choice/probe.py cuda > probe-cuda.jsonl"""

import itertools
import json
import sys

import torch
import torch.nn.functional as F

device = torch.device(sys.argv[1] if len(sys.argv) > 1 else "cuda")
BACKENDS = {-1: "error", 0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable"}
B, S = 4, 512
for dtype, head_dim, gqa, mask, dropout in itertools.product(
    (torch.float32, torch.bfloat16, torch.float16),
    (64, 128, 80, 96, 256, 320),
    (False, True),
    ("none", "causal", "bool", "float"),
    (0.0, 0.1),
):
    heads, kv_heads = 16, (4 if gqa else 16)
    q = torch.randn(B, heads, S, head_dim, device=device, dtype=dtype, requires_grad=True)
    k = torch.randn(B, kv_heads, S, head_dim, device=device, dtype=dtype, requires_grad=True)
    v = torch.randn(B, kv_heads, S, head_dim, device=device, dtype=dtype, requires_grad=True)
    attn_mask = None
    if mask == "bool":
        attn_mask = torch.ones(S, S, device=device, dtype=torch.bool).tril()
    elif mask == "float":
        attn_mask = torch.zeros(B, 1, S, S, device=device, dtype=dtype)
    causal = mask == "causal"
    case = {"dtype": str(dtype).removeprefix("torch."), "head_dim": head_dim, "gqa": gqa,
            "mask": mask, "dropout": dropout}  # fmt: skip
    try:
        choice = torch._fused_sdp_choice(q, k, v, attn_mask, dropout, causal, enable_gqa=gqa)
        case["backend"] = BACKENDS.get(int(choice), str(choice))
    except Exception as error:  # (a case no kernel takes)
        case["backend"] = f"raises {type(error).__name__}"
    if device.type == "cuda":
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        try:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout, causal,
                                                 enable_gqa=gqa)  # fmt: skip
            torch.cuda.synchronize()
            # what the forward keeps for backward, beyond its output
            case["kept_bytes"] = torch.cuda.memory_allocated() - before - out.nbytes
            del out
        except Exception as error:
            case["kept_bytes"] = None
            case["error"] = str(error).splitlines()[0][:160]
        case["attention_matrix_bytes"] = B * heads * S * S * q.element_size()
    print(json.dumps(case), flush=True)
if device.type == "cuda":
    print(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                      "capability": torch.cuda.get_device_capability()}))  # fmt: skip
