"""Does dynamo break gpt2 (transformers as on the H200) into two graphs in a real compile, as the
estimate's trace does? A small GPT2 (2 layers, 64 wide, vocab 1000), the real model on this
machine's CPU, called as the catalog's gpt2 is trained (labels inside the call, no KV cache):
torch._dynamo.explain, in fp32 and under bf16 autocast.

    PYTHONPATH=/tmp/libs517 python3 probe_graph_breaks.py > raw/graph-breaks.txt
"""

from __future__ import annotations

import torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel

print("transformers", transformers.__version__, "torch", torch.__version__)
config = GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=128, vocab_size=1000)
config.use_cache = False
model = GPT2LMHeadModel(config)
tokens = torch.randint(1000, (2, 128))
for label, precision in (
    ("fp32", torch.autocast("cpu", enabled=False)),
    ("bf16 autocast", torch.autocast("cpu", dtype=torch.bfloat16)),
):
    torch._dynamo.reset()
    with precision:
        explained = torch._dynamo.explain(model)(input_ids=tokens, labels=tokens)
    print(label, "graphs", explained.graph_count, "breaks", explained.graph_break_count)
    for graph_break in explained.break_reasons:
        print("  reason:", str(graph_break.reason)[:300])
        for frame in graph_break.user_stack[-3:]:
            print("    at", frame.filename.split("/transformers/")[-1], frame.lineno, frame.name)
