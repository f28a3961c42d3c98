"""The calibrated estimate on today's gpt2 (issue 27: "no worse than today's on the catalog's
accuracy set"). The accuracy set's gpt2 rows were measured before gpt2 became a workload
trained with transformers' own loss (../2026-12-05-calibrated-recheck); the gpt2 grid of
../2026-12-01-h200-gpt2-grid (H200, 37 ok specs, eager and compiled, measured after that
change) is today's gpt2's truth. Each spec's newest run is estimated through the public API:
- uncalibrated: `advisor.estimate(..., gpu="h200")` on an empty database;
- calibrated, leave one out: on a database holding every other spec of the grid, stored there
  by `advisor import` from an export of them.

    python calibrated.py raw OUT_DIR          # uncalibrated, and each measurement's record
    python calibrated.py calibrated OUT_DIR   # leave one out, on the others' records
    python calibrated.py table OUT_DIR > table.md
ESTIMATE_SHARD=i/n runs every n-th spec (each phase waits for the whole of the one before).
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import advisor

HERE = Path(__file__).parent
GRID = HERE.parent / "2026-12-01-h200-gpt2-grid" / "raw"
SETTINGS = ("batch_size", "grad_accum", "precision", "checkpointing", "optimizer", "compile")
GiB = 2**30


def grid() -> list[dict]:
    """Each ok spec of the grid once: its newest run."""
    newest: dict[tuple, dict] = {}
    for path in sorted(GRID.glob("chunk-*/run-*.json")):
        try:
            row = json.loads(path.read_text())
        except json.JSONDecodeError:  # (a run cut off by the device's time)
            continue
        key = tuple(row["spec"][k] for k in SETTINGS)
        if row["status"] == "ok" and (
            key not in newest or row["created_at"] > newest[key]["created_at"]
        ):
            newest[key] = row
    return [newest[k] for k in sorted(newest, key=str)]


def settings(row: dict) -> dict:
    return {"model": "gpt2", **{k: row["spec"][k] for k in SETTINGS}}


def record(row: dict, spec: advisor.TrialSpec) -> dict:
    """The measurement as an export holds it, under today's spec of the same setting and the
    sweep's cap it ran under (which calibration reads: a trial squeezed by it is left out)."""
    spec = dataclasses.replace(spec, memory_cap_bytes=row["spec"]["memory_cap_bytes"])
    return {"spec": spec.to_json(), "spec_hash": spec.hash, "status": "ok",
            "environment": row["environment"], "memory": row["memory"],
            "throughput": row["throughput"], "failure": None, "wall_s": row["wall_s"],
            "created_at": row["created_at"], "memory_snapshot": None}  # fmt: skip


def database_of(records: list[dict], folder: Path, name: str) -> str:
    export = folder / f"{name}.json"
    export.write_text(json.dumps({"format": "advisor-trials", "version": 1, "trials": records}))
    url = f"sqlite:///{folder / name}.db"
    command = [sys.executable, "-m", "advisor", "import", str(export), f"db_url={url}"]
    subprocess.run(command, check=True, capture_output=True)
    return url


def summary(errors: list[float]) -> str:
    """median |error| / worst |error| / worst under; and how many within [-2%, +5%]."""
    within = sum(-0.02 <= e <= 0.05 for e in errors)
    return (f"{statistics.median(abs(e) for e in errors):.1%} / {max(map(abs, errors)):.1%} / "
            f"{min(min(errors), 0.0):+.1%}; within [-2%, +5%]: {within} of {len(errors)}")  # fmt: skip


def shard(rows: list[dict]) -> list[tuple[int, dict]]:
    i, n = map(int, os.environ.get("ESTIMATE_SHARD", "0/1").split("/"))
    return list(enumerate(rows))[i::n]


def raw(out: Path) -> None:
    """The uncalibrated estimate of the shard's specs, each with its measurement's record."""
    rows = grid()
    name = os.environ.get("ESTIMATE_SHARD", "0/1").replace("/", "-")
    with tempfile.TemporaryDirectory() as temp, open(out / f"raw-{name}.jsonl", "w") as sink:
        empty = f"sqlite:///{temp}/empty.db"
        for i, row in shard(rows):
            e = advisor.estimate(**settings(row), device="cuda", gpu="h200", db_url=empty)
            sink.write(json.dumps({"i": i, "record": record(row, e.spec),
                                   "peak_allocated_bytes": e.peak_allocated_bytes,
                                   "device_peak_bytes": e.device_peak_bytes}) + "\n")  # fmt: skip
            sink.flush()


def calibrated(out: Path) -> None:
    """The shard's specs estimated on a database of every other spec's measurement."""
    rows = grid()
    said = {r["i"]: r for p in out.glob("raw-*.jsonl") for r in map(json.loads, p.open())}
    assert sorted(said) == list(range(len(rows))), "the raw phase is not complete"
    name = os.environ.get("ESTIMATE_SHARD", "0/1").replace("/", "-")
    with tempfile.TemporaryDirectory() as temp, open(out / f"cal-{name}.jsonl", "w") as sink:
        for i, row in shard(rows):
            others = [said[j]["record"] for j in range(len(rows)) if j != i]
            url = database_of(others, Path(temp), f"leave-{i}")
            e = advisor.estimate(**settings(row), device="cuda", gpu="h200", db_url=url)
            assert e.calibration is not None, settings(row)
            sink.write(json.dumps({"i": i, "trials": e.calibration.trials,
                                   "peak_allocated_bytes": e.peak_allocated_bytes,
                                   "device_peak_bytes": e.device_peak_bytes}) + "\n")  # fmt: skip
            sink.flush()


def table(out: Path) -> None:
    rows = grid()
    said = {r["i"]: r for p in out.glob("raw-*.jsonl") for r in map(json.loads, p.open())}
    cal = {r["i"]: r for p in out.glob("cal-*.jsonl") for r in map(json.loads, p.open())}
    errors: dict[str, list[float]] = {k: [] for k in ("a", "a_cal", "d", "d_cal")}
    print("| spec | measured: peak allocated, steady device peak (GiB) | uncalibrated "
          "| calibrated (trials it used) |\n|---|---|---|---|")  # fmt: skip
    for i, row in enumerate(rows):
        if i not in said or i not in cal:
            continue
        m = row["memory"]
        allocated = m["steady_peak_allocated_bytes"]
        steady = m["steady_peak_reserved_bytes"] + m["context_bytes"]
        e = {"a": said[i]["peak_allocated_bytes"] / allocated - 1,
             "a_cal": cal[i]["peak_allocated_bytes"] / allocated - 1,
             "d": said[i]["device_peak_bytes"] / steady - 1,
             "d_cal": cal[i]["device_peak_bytes"] / steady - 1}  # fmt: skip
        for k, v in e.items():
            errors[k].append(v)
        s = settings(row)
        print(f"| b{s['batch_size']} {s['precision']} {s['optimizer']} ckpt={s['checkpointing']} "
              f"compile={s['compile']} | {allocated / GiB:.2f}, {steady / GiB:.2f} | "
              f"{e['a']:+.1%}, {e['d']:+.1%} | {e['a_cal']:+.1%}, {e['d_cal']:+.1%} "
              f"({cal[i]['trials']}) |")  # fmt: skip
    print(f"\n{len(errors['a'])} of {len(rows)} specs; median abs / worst abs / worst under:")
    for key, label in (("a", "peak allocated, uncalibrated"), ("a_cal", "peak allocated, "
                       "calibrated"), ("d", "steady device peak, uncalibrated"),
                       ("d_cal", "steady device peak, calibrated")):  # fmt: skip
        print(f"- {label}: {summary(errors[key])}")


if __name__ == "__main__":
    {"raw": raw, "calibrated": calibrated, "table": table}[sys.argv[1]](Path(sys.argv[2]))
