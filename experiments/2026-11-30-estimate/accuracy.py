"""`advisor estimate` against what the H200 measured (issue 4), on this CPU-only machine.

    python3 accuracy.py > accuracy.md

The measured side is every ok trial recorded in experiments/2026-11-30-h200-measure/raw and
experiments/2026-11-30-h200-sweep/raw (resnet50, gpt2, vit_b_16). Each trial's spec is rebuilt
from its settings through the config (its hash must match the recorded one), estimated without
calibration, then with calibration on the *other* trials of the same model (leave one out).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from advisor.config import load, trial_spec
from advisor.estimate import estimate, fake_step
from advisor.memory_model import Target
from advisor.result import Environment, Status, Throughput, TrialResult, memory_from_dict

HERE = Path(__file__).parent
RAW = [
    *sorted((HERE.parent / "2026-11-30-h200-measure" / "raw").glob("results-gpu-*.jsonl")),
    HERE.parent / "2026-11-30-h200-sweep" / "raw" / "grid.jsonl",
]
H200 = Target("h200", 150754820096, 0.05)
GiB = 2**30


def trials() -> list[TrialResult]:
    seen: dict[str, TrialResult] = {}
    for path in RAW:
        for line in path.open():
            d = json.loads(line)
            if d.get("status") != "ok":
                continue
            s = d["spec"]
            spec = trial_spec(
                load(
                    [
                        "device=cuda",
                        f"model={s['model']}",
                        f"batch_size={s['batch_size']}",
                        f"grad_accum={s['grad_accum']}",
                        f"precision={s['precision']}",
                        f"checkpointing={s['checkpointing']}",
                        f"optimizer={s['optimizer']}",
                        f"channels_last={s['channels_last']}",
                        f"compile={s['compile']}",
                        f"expandable_segments={s['expandable_segments']}",
                    ]
                )
            )
            assert spec.hash == s["hash"], (spec.hash, s)
            if "part a" in path.name and s["precision"] == "fp16":
                continue  # measured before the fp16 warm-up fix; part b has them again
            seen[spec.hash] = TrialResult(
                spec,
                Status.ok,
                Environment(**d["environment"]),
                memory_from_dict(d["memory"]),
                Throughput(**d["throughput"]),
                None,
                d["wall_s"],
                id=len(seen) + 1,
            )
    return list(seen.values())


def main() -> None:
    measured = trials()
    rows, errors = [], {"alloc": [], "device": [], "alloc_cal": [], "device_cal": []}
    seconds = []
    for r in measured:
        m = r.memory
        fake_step.cache_clear()  # time a cold estimate: two fake steps (batch b and 2b)
        started = time.perf_counter()
        raw = estimate(r.spec, H200)
        seconds.append((r.spec.model.name, time.perf_counter() - started))
        others = [o for o in measured if o is not r]
        cal = estimate(r.spec, H200, others)
        e = {
            "alloc": raw.peak_allocated_bytes / m.steady_peak_allocated_bytes - 1,
            "device": raw.device_peak_bytes / m.device_peak_bytes - 1,
            "alloc_cal": cal.peak_allocated_bytes / m.steady_peak_allocated_bytes - 1,
            "device_cal": cal.device_peak_bytes / m.device_peak_bytes - 1,
        }
        for k, v in e.items():
            errors[k].append(v)
        s = r.spec
        rows.append(
            f"| {s.model.name} {s.precision.value} ckpt={s.checkpointing.value} "
            f"cl={s.channels_last} b{s.batch_size} | {m.steady_peak_allocated_bytes / GiB:.2f} "
            f"| {raw.peak_allocated_bytes / GiB:.2f} ({e['alloc']:+.1%}) "
            f"| {cal.peak_allocated_bytes / GiB:.2f} ({e['alloc_cal']:+.1%}) "
            f"| {m.device_peak_bytes / GiB:.2f} | {raw.device_peak_bytes / GiB:.2f} ({e['device']:+.1%}) "
            f"| {cal.device_peak_bytes / GiB:.2f} ({e['device_cal']:+.1%}) |"
        )
    print(f"# Estimate against the H200: {len(measured)} measured trials\n")
    print(
        "| spec | measured steady peak alloc GiB | estimated | calibrated (leave one out) "
        "| measured device peak GiB | estimated | calibrated |"
    )
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("\n| error | median abs | worst abs | worst under (most negative) |")
    print("|---|---|---|---|")
    for k, v in errors.items():
        print(
            f"| {k} | {statistics.median(abs(x) for x in v):.1%} | {max(abs(x) for x in v):.1%} "
            f"| {min(v):+.1%} |"
        )
    per_model = {}
    for model, t in seconds:
        per_model.setdefault(model, []).append(t)
    print(
        "\nseconds per uncalibrated estimate, cold (two fake steps; the first of all also probes the optimizer): "
        + ", ".join(
            f"{k} median {statistics.median(v):.1f} s, max {max(v):.1f} s"
            for k, v in per_model.items()
        )
    )


if __name__ == "__main__":
    main()
