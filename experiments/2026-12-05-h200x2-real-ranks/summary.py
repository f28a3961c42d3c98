"""Each real run beside its prediction, as JSON: the job's rate (modelled from the rank's
measured step) and the rank's device peak (measured on one GPU) against what the real run on
the host's GPUs recorded (rank 0's).

    python summary.py OUT DB_URL
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import advisor


def main(out: str, db_url: str) -> None:
    runs = advisor.history(kind="training", gpus=2, db_url=db_url)
    said = []
    for strategy in ("ddp", "fsdp"):
        predicted = json.loads((Path(out) / f"predicted-{strategy}.json").read_text())
        real = next((r for r in runs if r.follows == predicted["id"]), None)
        job = predicted.get("job") or {}
        row = {"strategy": strategy, "trial": predicted["id"], "run": real and real.id,
               "predicted_samples_per_s": job.get("samples_per_s"),
               "rank_samples_per_s": predicted["throughput"]["samples_per_s"],
               "predicted_device_peak_bytes": predicted["memory"]["device_peak_bytes"]}  # fmt: skip
        if real is not None:
            row["real_samples_per_s"] = real.samples_per_s
            row["real_device_peak_bytes"] = real.memory.device_peak_bytes if real.memory else None
            if row["predicted_samples_per_s"]:
                row["rate_error"] = real.samples_per_s / row["predicted_samples_per_s"] - 1
            if row["real_device_peak_bytes"]:
                row["peak_error"] = (
                    row["real_device_peak_bytes"] / row["predicted_device_peak_bytes"] - 1
                )
        said.append(row)
    print(json.dumps(said, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
