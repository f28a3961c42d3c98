"""Is "fits" now said only of what fits for a net in strict fp32? vgg11 fp32 under a 16 GiB
budget: the largest batch and the largest by the upper side, estimated on the CPU (public API,
an empty database, the budget as the card's memory, no margin); then each run on the GPU by
`advisor run` under an allocator cap of the budget less the CUDA context its run measured.

    python verdict.py estimate OUT.json
    python verdict.py run ESTIMATE.json OUT.jsonl    # on the GPU; also the batch the code
                                                     # before said fits by its upper side
                                                     # (verdict-estimate-before.json beside it,
                                                     # estimated with build/before)
"""

import json
import sys
import tempfile
from pathlib import Path

import advisor

HERE = Path(__file__).resolve().parent
SPEC = [f"workload={HERE / 'workloads.py'}:vgg11", "precision=fp32"]
BUDGET = 16 * 2**30
CONTEXT = 796917760  # the CUDA context of raw/runs/vgg11_precision-fp32_batch_size-24.json


def estimate(out: str) -> None:
    with tempfile.TemporaryDirectory() as empty:
        e = advisor.estimate(overrides=[
            *SPEC, "batch_size=24", "gpu=h100_80gb", f"gpu.memory={BUDGET}", "margin=0",
            f"db_url=sqlite:///{empty}/e.sqlite",
        ])  # fmt: skip
    said = {"largest_batch": e.largest_batch, "largest_batch_sure": e.largest_batch_sure}
    Path(out).write_text(json.dumps(said) + "\n")


def run(estimated: str, out: str) -> None:
    said = json.loads(Path(estimated).read_text())
    before = Path(estimated).with_name("verdict-estimate-before.json")  # the code before the bound
    said["before"] = json.loads(before.read_text())["largest_batch_sure"]
    with tempfile.TemporaryDirectory() as db, open(out, "a") as log:
        for which in ("largest_batch_sure", "before", "largest_batch"):
            result = advisor.run(overrides=[
                *SPEC, f"batch_size={said[which]}", f"memory_cap={BUDGET - CONTEXT}",
                "measure.min_timed_steps=3", "measure.max_timed_s=2",
                f"db_url=sqlite:///{db}/truth.sqlite",
            ])  # fmt: skip
            log.write(json.dumps({which: said[which], "status": result.status.value}) + "\n")
            log.flush()


if __name__ == "__main__":
    {"estimate": lambda: estimate(sys.argv[2]), "run": lambda: run(*sys.argv[2:4])}[sys.argv[1]]()
