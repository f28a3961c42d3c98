"""What CUDA's scaled_dot_product_attention does with an additive float mask that needs its
gradient (T5's relative position bias, passed as attn_mask by transformers): the kernel the
dispatcher picks, what the forward keeps, and how far the backward's allocations rise above
what was allocated before it. One JSON line per case; from the repository root on the GPU:
    python3 experiments/2026-12-03-h200-unseen-models/probe_bias.py > probe-bias.jsonl"""

import itertools
import json

import torch
import torch.nn.functional as F

BACKENDS = {-1: "error", 0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable"}
B, H, S, D = 8, 8, 512, 64
cuda = torch.device("cuda")
for dtype, bias_batch, bias_grad in itertools.product(
    (torch.float32, torch.bfloat16), (1, B), (False, True)
):
    q, k, v = (torch.randn(B, H, S, D, device=cuda, dtype=dtype, requires_grad=True)
               for _ in range(3))  # fmt: skip
    bias = torch.randn(bias_batch, H, S, S, device=cuda, dtype=dtype, requires_grad=bias_grad)
    case = {"dtype": str(dtype).removeprefix("torch."), "bias_batch": bias_batch,
            "bias_grad": bias_grad, "matrix_bytes": B * H * S * S * q.element_size()}  # fmt: skip
    choice = torch._fused_sdp_choice(q, k, v, bias, 0.0, False)
    case["backend"] = BACKENDS.get(int(choice), str(choice))
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    out = F.scaled_dot_product_attention(q, k, v, bias)
    torch.cuda.synchronize()
    case["kept_bytes"] = torch.cuda.memory_allocated() - before - out.nbytes
    grad = torch.randn_like(out)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    out.backward(grad)
    torch.cuda.synchronize()
    case["backward_rise_bytes"] = torch.cuda.max_memory_allocated() - start
    case["bias_grad_shape"] = list(bias.grad.shape) if bias.grad is not None else None
    print(json.dumps(case), flush=True)
    del q, k, v, bias, out, grad
print(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name()}))
