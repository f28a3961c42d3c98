"""inductor's shape padding (pad_mm) timed as inductor times it, for an output layer's two
backward matmuls over a grid of vocabularies (not multiples of 8), tokens and widths, in bf16:
when does padding win? Internal API (torch/_inductor/fx_passes/pad_mm.py, torch 2.11).

    python pad_grid.py OUT.jsonl            # on a GPU
    python pad_grid.py table OUT.jsonl      # the weight gradient's answers, as a table

Per shape: the input gradient (the logits' gradient [tokens, vocab], contiguous, times the
weight [vocab, width]: the gradient's padding is planned away, not timed) and the weight
gradient (the gradient transposed, [vocab, tokens] non-contiguous, times the layer's input
[tokens, width]: its padding copy is timed). Each with inductor's benchmark and its 1.1 rule
(is_padded_faster). inductor's benchmark of a gradient pre-padded also zeroes the padded
columns (write_pad): done here too.
"""

import itertools
import json
import sys
from collections.abc import Callable

import torch
from torch._inductor.fx_passes import pad_mm as pm
from torch._inductor.runtime.benchmarking import benchmarker


def timed(fn: Callable[[], object]) -> float:
    return benchmarker.benchmark_gpu(fn, warmup=5)


def timings(vocab: int, tokens: int, width: int) -> list[dict]:
    """Both backward matmuls of one shape, unpadded and padded, as pad_mm times them."""
    grad = torch.randn(tokens, vocab, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(vocab, width, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(tokens, width, device="cuda", dtype=torch.bfloat16)
    pad = pm.get_padded_length(vocab, 8)
    # input gradient: mat1 [tokens, vocab] pre-padded (excluded), mat2 weight [vocab, width]
    grad_padded = pm.pad_mat1(grad, m_padded_length=0, k_padded_length=pad)

    def input_padded() -> None:
        grad_padded[:, -pad:].fill_(0)  # inductor's write_pad
        pm.pad_mm(grad_padded, weight, 0, pad, 0, mat1_pre_padded=True)

    input_ms = (timed(lambda: torch.mm(grad, weight)), timed(input_padded))
    # weight gradient: mat1 grad.t() [vocab, tokens] (its padding copy timed), mat2 x
    weight_ms = (
        timed(lambda: torch.mm(grad.t(), x)),
        timed(lambda: pm.pad_mm(grad.t(), x, pad, 0, 0)),
    )
    shape = {"vocab": vocab, "tokens": tokens, "width": width}
    return [
        {"matmul": name, **shape, "ori_ms": ori, "pad_ms": padded, "pad": ori > 1.1 * padded}
        for name, (ori, padded) in (("input", input_ms), ("weight", weight_ms))
    ]


def main(out: str) -> None:
    rows = []
    for vocab, tokens, width in itertools.product(
        (32001, 50257, 51865, 128257), (4096, 8192, 16384), (512, 768, 1024, 2048, 4096)
    ):
        rows += timings(vocab, tokens, width)
        print(rows[-2], rows[-1], flush=True)
        torch.cuda.empty_cache()
    with open(out, "w") as file:
        file.writelines(json.dumps(r) + "\n" for r in rows)


def table(path: str) -> None:
    """Whether pad_mm padded the weight gradient (P) or not (-), by shape."""
    with open(path) as file:
        rows = [json.loads(line) for line in file]
    weight = [r for r in rows if r["matmul"] == "weight"]
    widths = sorted({r["width"] for r in weight})
    answers = {(r["vocab"], r["tokens"], r["width"]): "P" if r["pad"] else "-" for r in weight}
    print("| vocab | tokens | " + " | ".join(f"width {w}" for w in widths) + " |")
    print("|---|---|" + "---|" * len(widths))
    for vocab, tokens in sorted({(r["vocab"], r["tokens"]) for r in weight}):
        cells = " | ".join(answers[vocab, tokens, w] for w in widths)
        print(f"| {vocab} | {tokens} | {cells} |")
    padded = sum(r["pad"] for r in rows if r["matmul"] == "input")
    print(f"\ninput gradient padded in {padded} of {len(rows) - len(weight)} shapes")


if __name__ == "__main__":
    if sys.argv[1] == "table":
        table(sys.argv[2])
    else:
        main(sys.argv[1])
