"""The uncalibrated estimate (public API, an empty database, gpu=h100_80gb) of each spec whose
memory snapshot ../2026-12-05-cudnn-workspaces took on the H100 (its specs.txt), against that
run's measurement (the snapshots' NAME.json, from raw/device/snapshots.tar unpacked into DIR).

    python snapshot_specs.py DIR OUT.jsonl"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import advisor

SPECS = Path(__file__).resolve().parent.parent / "2026-12-05-cudnn-workspaces" / "specs.txt"


def main(folder: Path, out: str) -> None:
    lines = [line.split() for line in SPECS.read_text().splitlines() if line[:2] in ("a ", "b ")]
    with tempfile.TemporaryDirectory() as empty, open(out, "a") as sink:
        for _, what, *settings in lines:
            name = "_".join([what.split("/")[-1].removesuffix(".py:workload"), *settings])
            name = name.replace("model=", "").replace("=", "-")
            started, row = time.perf_counter(), {"run": name}
            db_url = f"sqlite:///{empty}/e.sqlite"
            try:
                e = advisor.estimate(
                    overrides=[what, *settings, "gpu=h100_80gb", f"db_url={db_url}"]
                )
            except Exception as error:  # kept: an estimate that cannot answer
                row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0]}"
            else:
                m = json.loads((folder / f"{name}.json").read_text())["memory"]
                memory = e.to_dict()["memory"]
                device = m["steady_peak_reserved_bytes"] + m["context_bytes"]
                row |= {
                    "peak_allocated": memory["peak_allocated_bytes"]
                    / m["steady_peak_allocated_bytes"]
                    - 1,
                    "device_peak": memory["device_peak_bytes"] / device - 1,
                }
            sink.write(json.dumps(row | {"seconds": time.perf_counter() - started}) + "\n")
            sink.flush()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
