"""The uncalibrated estimate (public API, an empty database, the truth's card) of the measured
eager specs whose models run depthwise kernels on channels-last input in 16 bits, against each
one's measurement. (The compiled EfficientNet-B0 is ../2026-12-06-compiled-device-peak/quick.py's.)

    python estimate.py run OUT.jsonl          # with the code on PYTHONPATH
    python estimate.py table BEFORE.jsonl AFTER.jsonl > table.md

Run with the libraries the truth was measured with (torch 2.11, transformers 5.17.0)."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import advisor

EXPERIMENTS = Path(__file__).resolve().parent.parent
UNSEEN = EXPERIMENTS / "2026-12-03-h200-unseen-models"
FIFTH = EXPERIMENTS / "2026-12-06-channels-last-range"
# (set, model, its workload, settings, the truth's card, the folder of its measurement)
SPECS = [
    ("heldout", "efficientnet_b0", f"{UNSEEN}/heldout/efficientnet_b0.py:workload",
     "precision=bf16 batch_size=256 channels_last=true", "h200", UNSEEN / "raw/runs"),
    ("second", "efficientnet_v2_s", f"{UNSEEN}/second/efficientnet_v2_s.py:workload",
     "precision=bf16 batch_size=128 channels_last=true checkpointing=blocks", "h200",
     UNSEEN / "raw/runs"),
    ("fifth", "shufflenet_v2", f"{FIFTH}/workloads.py:shufflenet_v2",
     "precision=bf16 batch_size=128 channels_last=true", "h100_80gb", FIFTH / "raw/runs"),
    ("fifth", "convnext_tiny", f"{FIFTH}/workloads.py:convnext_tiny",
     "precision=bf16 batch_size=64 channels_last=true", "h100_80gb", FIFTH / "raw/runs"),
]  # fmt: skip


def run_name(model: str, settings: str) -> str:
    """The measurement's file name, as measure.sh named it."""
    return "_".join([model, *settings.split()]).replace("=", "-")


def run(out: str) -> None:
    with tempfile.TemporaryDirectory() as empty, open(out, "a") as sink:
        for chosen, model, workload, settings, gpu, _ in SPECS:
            started, row = time.perf_counter(), {"set": chosen, "run": run_name(model, settings)}
            overrides = [f"workload={workload}", *settings.split(), f"gpu={gpu}",
                         f"db_url=sqlite:///{empty}/e.sqlite"]  # fmt: skip
            said = advisor.estimate(overrides=overrides).to_dict()
            row |= {k: said["memory"][k] for k in ("peak_allocated_bytes", "device_peak_bytes")}
            row |= {k: said[k] for k in ("largest_batch", "largest_batch_sure")}
            sink.write(json.dumps(row | {"seconds": time.perf_counter() - started}) + "\n")
            sink.flush()


def table(before_path: str, after_path: str) -> None:
    read = [{json.loads(line)["run"]: json.loads(line) for line in Path(p).read_text().splitlines()}
            for p in (before_path, after_path)]  # fmt: skip
    print("| set | spec | peak allocated before | after | device peak before | after |")
    print("|---|---|---:|---:|---:|---:|")
    for chosen, model, _, settings, _, runs in SPECS:
        name = run_name(model, settings)
        m = json.loads((runs / f"{name}.json").read_text())["memory"]
        device = m["steady_peak_reserved_bytes"] + m["context_bytes"]
        cells = [r[name]["peak_allocated_bytes"] / m["steady_peak_allocated_bytes"] - 1
                 for r in read] + [r[name]["device_peak_bytes"] / device - 1 for r in read]  # fmt: skip
        print(f"| {chosen} | {name} | " + " | ".join(f"{c:+.1%}" for c in cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "run":
        run(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "table":
        table(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(__doc__)
