"""Is the calibrated estimate still no worse on the catalog's accuracy set than when issue 27
was filed (../2026-11-30-estimate: 71 H200 specs; calibrated peak allocated 0.1% / 4.1% /
-4.1%, steady device peak 1.7% / 6.3% / -3.4%, median abs / worst abs / worst under)?

The same 71 measurements (the newest of each spec, as that folder's accuracy.py reads them),
estimated with today's code through the public API: `advisor.estimate(..., gpu="h200")`,
uncalibrated on an empty database, then calibrated leave-one-out on a database holding every
other trial of the same model, stored there by `advisor import` from an export of them.

    python recheck.py [MODEL ...] > raw/recheck.md   (all three models unless named; about
                                                     15 minutes on two busy cores)
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import advisor

HERE = Path(__file__).parent
EXPERIMENTS = HERE.parent
RAW = [  # as ../2026-11-30-estimate/accuracy.py reads them; each spec's newest run counts
    *sorted((EXPERIMENTS / "2026-11-30-h200-measure" / "raw").glob("results-gpu-*.jsonl")),
    EXPERIMENTS / "2026-11-30-h200-sweep" / "raw" / "grid.jsonl",
    EXPERIMENTS / "2026-11-30-h200-memory" / "raw" / "trials.jsonl",
    *sorted((EXPERIMENTS / "2026-11-30-h200-accuracy-alone" / "raw").glob("trials-lane*.jsonl")),
    EXPERIMENTS / "2026-11-30-h200-compile-ckpt" / "raw" / "trials-accuracy.jsonl",
]
SETTINGS = ("model", "batch_size", "grad_accum", "precision", "checkpointing", "optimizer",
            "channels_last", "compile", "expandable_segments")  # fmt: skip
GiB = 2**30


def measured() -> list[dict]:
    """Each ok, uncapped spec once: its newest run (fp16 of results-gpu-a: before a fix)."""
    newest: dict[str, dict] = {}
    for path in RAW:
        for row in map(json.loads, path.open()):
            if row.get("status") != "ok" or row["spec"]["memory_cap_bytes"] is not None:
                continue  # (a row of a context's bytes alone has no spec)
            spec = row["spec"]
            if path.name == "results-gpu-a.jsonl" and spec["precision"] == "fp16":
                continue
            newest[spec["hash"]] = row
    return list(newest.values())


def settings(row: dict) -> dict:
    return {k: row["spec"][k] for k in SETTINGS}


def record(row: dict, spec: advisor.TrialSpec) -> dict:
    """The measurement as an export holds it (advisor import reads it)."""
    memory = dict(row["memory"])
    if memory.get("peak_phase"):  # (-h200-memory wrote 'Phase.forward')
        memory["peak_phase"] = memory["peak_phase"].removeprefix("Phase.")
    return {"spec": spec.to_json(), "spec_hash": spec.hash, "status": "ok",
            "environment": row["environment"], "memory": memory,
            "throughput": row["throughput"], "failure": None, "wall_s": row["wall_s"],
            "created_at": "2026-11-30T00:00:00+00:00", "memory_snapshot": None}  # fmt: skip


def database_of(records: list[dict], folder: Path, name: str) -> str:
    """A SQLite database holding the records, stored by `advisor import`."""
    export = folder / f"{name}.json"
    export.write_text(json.dumps({"format": "advisor-trials", "version": 1, "trials": records}))
    url = f"sqlite:///{folder / name}.db"
    advisor_command = Path(sys.executable).with_name("advisor")
    subprocess.run([str(advisor_command), "import", str(export), f"db_url={url}"], check=True,
                   capture_output=True)  # fmt: skip
    return url


def summary(errors: list[float]) -> str:
    worst = max(errors, key=abs)
    under = min(errors)
    return (f"{statistics.median(abs(e) for e in errors):.1%} / {abs(worst):.1%} / "
            f"{min(under, 0.0):+.1%}")  # fmt: skip


def main() -> None:
    rows = [r for r in measured() if r["spec"]["model"] in (sys.argv[1:] or [r["spec"]["model"]])]
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        empty = f"sqlite:///{folder / 'empty'}.db"
        raw = {}
        for row in rows:
            estimate = advisor.estimate(**settings(row), device="cuda", gpu="h200", db_url=empty)
            said = estimate.to_dict()["spec"]  # (its hash is not 2026-11-30's: spec grew since)
            assert {k: said[k] for k in SETTINGS} == settings(row), (said, row["spec"])
            raw[row["spec"]["hash"]] = estimate
        records = {h: record(row, raw[h].spec) for row in rows if (h := row["spec"]["hash"])}
        print("| spec | measured: peak allocated, steady device peak (GiB) | uncalibrated "
              "| calibrated |\n|---|---|---|---|")  # fmt: skip
        errors: dict[str, list[float]] = {k: [] for k in ("a", "a_cal", "d", "d_cal")}
        for row in rows:
            h, m = row["spec"]["hash"], row["memory"]
            others = [records[o["spec"]["hash"]] for o in rows
                      if o is not row and o["spec"]["model"] == row["spec"]["model"]]  # fmt: skip
            url = database_of(others, folder, h)
            cal = advisor.estimate(**settings(row), device="cuda", gpu="h200", db_url=url)
            assert cal.calibration is not None, h
            allocated = m["steady_peak_allocated_bytes"]
            steady = m["steady_peak_reserved_bytes"] + m["context_bytes"]
            e = {"a": raw[h].peak_allocated_bytes / allocated - 1,
                 "a_cal": cal.peak_allocated_bytes / allocated - 1,
                 "d": raw[h].device_peak_bytes / steady - 1,
                 "d_cal": cal.device_peak_bytes / steady - 1}  # fmt: skip
            for k, v in e.items():
                errors[k].append(v)
            s = row["spec"]
            print(f"| {s['model']} {s['precision']} ckpt={s['checkpointing']} "
                  f"cl={s['channels_last']} b{s['batch_size']} | {allocated / GiB:.2f}, "
                  f"{steady / GiB:.2f} | {e['a']:+.1%}, {e['d']:+.1%} "
                  f"| {e['a_cal']:+.1%}, {e['d_cal']:+.1%} |", flush=True)  # fmt: skip
    import transformers  # (its version moves gpt2's figures)

    print(f"\n{len(rows)} specs (transformers {transformers.__version__}); median abs / worst "
          "abs / worst under:")  # fmt: skip
    print(f"- peak allocated, uncalibrated: {summary(errors['a'])}")
    print(f"- peak allocated, calibrated: {summary(errors['a_cal'])}")
    print(f"- steady device peak, uncalibrated: {summary(errors['d'])}")
    print(f"- steady device peak, calibrated: {summary(errors['d_cal'])}")


if __name__ == "__main__":
    main()
