"""Issue 28: `advisor estimate gpus=N` (no GPU) against one rank of each job the H200 measured
(../2026-12-05-h200-ranks/raw/shards.json: gpt2 at micro batch 8 and the 1.1B Llama at 4,
bf16, fused AdamW; one GPU, DDP at 2, FSDP2 at 2, 4 and 8, gpt2 also compiled at 8).

    python compare.py OUT.json

Each estimate is a new user's: an empty database, so nothing calibrates it. Public API only.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import advisor

HERE = Path(__file__).parent
MEASURED = HERE.parent / "2026-12-05-h200-ranks" / "raw" / "shards.json"
LLAMA = f"{HERE.parent / '2026-12-05-h200-ranks' / 'llama_1b.py'}:workload"
NAMES = {"gpt2": {"model": "gpt2"}, "llama_1b": {"workload": LLAMA}}


def main(out: str) -> None:
    rows = []
    db_url = f"sqlite:///{tempfile.mkdtemp()}/empty.sqlite"
    for measured in json.loads(MEASURED.read_text()):
        spec, memory = measured["spec"], measured["memory"]
        job = {"gpus": measured["gpus"], "strategy": measured["strategy"]}
        started = time.perf_counter()
        estimate = advisor.estimate(
            **NAMES[measured["model"]], gpu="h200", batch_size=spec["batch_size"],
            precision=spec["precision"], optimizer=spec["optimizer"], compile=spec["compile"],
            db_url=db_url, **(job if job["gpus"] > 1 else {}),
        )  # fmt: skip
        said = estimate.to_dict()["memory"]
        row = {
            **{k: measured[k] for k in ("model", "gpus", "strategy", "compile")},
            "estimate_s": time.perf_counter() - started,
            "measured": {k: memory[k] for k in ("peak_allocated_bytes", "device_peak_bytes")},
            "estimated": {k: said[k] for k in ("peak_allocated_bytes", "device_peak_bytes")},
            "error_range": list(estimate.error_range),  # where its record puts the truth
            "unmodelled": list(estimate.unmodelled),
            "notes": list(estimate.notes),
        }
        row["error"] = {k: row["estimated"][k] / row["measured"][k] - 1 for k in row["measured"]}
        rows.append(row)
        print(row["model"], row["gpus"], row["strategy"], row["compile"],
              f"allocated {row['error']['peak_allocated_bytes']:+.1%}",
              f"device peak {row['error']['device_peak_bytes']:+.1%}",
              f"({row['estimate_s']:.0f} s)", flush=True)  # fmt: skip
    Path(out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
