"""The checking set's uncalibrated estimates with each cuDNN workspace the fake step gives a
convolution swapped for the one measured for that very layer on the H100 (a table of raw/,
`survey.py OUT SECONDS check`): how close the estimate comes when the workspaces are right, the
ceiling of any rule. Internal API (the rule is swapped); estimates as estimate.py makes them.

    python oracle.py OUT.jsonl [rule]   # rule: the code's own workspaces, for comparison
    ORACLE_TABLE=check-heuristics.jsonl.gz python oracle.py OUT.jsonl   # another table in raw/
                                        # (check-2.jsonl.gz, the benchmark's, unless given)
"""

import gzip
import json
import os
import sys
from pathlib import Path

import estimate
import torch

import advisor.estimation.cuda_workspaces as workspaces

HERE = Path(__file__).resolve().parent
TABLE = os.environ.get("ORACLE_TABLE", "check-2.jsonl.gz")  # in raw/
ruled = workspaces._cudnn_workspaces
measured: dict[tuple, dict[str, list[int]]] = {}
missed: list[tuple] = []


def _precision(x: torch.Tensor, tf32: bool) -> str:
    names = {torch.bfloat16: "bf16", torch.float16: "fp16"}
    return names.get(x.dtype, "tf32" if tf32 else "fp32")


def looked_up(x, w, y, stride, transposed, tf32, runs):
    key = (_precision(x, tf32), tuple(x.shape), tuple(w.shape), tuple(stride), tuple(y.shape))
    if transposed or key not in measured or not x.is_contiguous():
        missed.append(key)
        return ruled(x, w, y, stride, transposed, tf32, runs)
    return [measured[key][run] for run in runs if measured[key][run]]


def _load() -> None:
    with gzip.open(HERE / "raw" / TABLE, "rt") as lines:
        rows = [json.loads(line) for line in lines][1:]
    for row in rows:
        x = torch.empty(row["x"], device="meta")
        w = torch.empty(row["w"], device="meta")
        y = torch.ops.aten.convolution(x, w, None, row["stride"], row["padding"],
                                       row["dilation"], False, [0, 0], row["groups"])  # fmt: skip
        key = (row["precision"], tuple(row["x"]), tuple(row["w"]), tuple(row["stride"]),
               tuple(y.shape))  # fmt: skip
        measured[key] = {run: row["runs"].get(run, []) for run in ("forward", "input", "weight")}


if __name__ == "__main__":
    if sys.argv[2:] != ["rule"]:
        _load()
        workspaces._cudnn_workspaces = looked_up
    estimate.run(sys.argv[1])
    print(f"{len(missed)} convolution calls not in the table: {sorted(set(missed))[:5]}")
