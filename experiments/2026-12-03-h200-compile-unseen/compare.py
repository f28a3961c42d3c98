"""advisor's uncalibrated estimate of each compiled spec of specs.txt (fake tensors, this
machine's CPU, a fresh database, public API) against the H200's measurement (raw/runs/*.json,
written by measure.sh); the models' workload files are ../2026-12-03-h200-unseen-models's.

    python3 compare.py estimate > raw/estimates.jsonl   # the CPU side
    python3 compare.py table > table.md                 # both sides, side by side
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import advisor

HERE = Path(__file__).resolve().parent
MODELS = HERE.parent / "2026-12-03-h200-unseen-models"
GB = 1e9


def specs() -> list[tuple[str, str, list[str]]]:
    """(set, workload file, settings) of each spec line."""
    rows = []
    for line in (HERE / "specs.txt").read_text().splitlines():
        if line.startswith(("heldout ", "second ")):
            chosen_set, name, *settings = line.split()
            rows.append((chosen_set, name, settings))
    return rows


def run_name(name: str, settings: list[str]) -> str:
    """The file name measure.sh gives a spec's run."""
    return "_".join([name, *settings]).replace("=", "-")


def estimate_all() -> None:
    with tempfile.TemporaryDirectory() as empty:
        db_url = f"sqlite:///{empty}/fresh.sqlite"  # no history: the estimate is uncalibrated
        for chosen_set, name, settings in specs():
            started = time.perf_counter()
            row: dict = {"run": run_name(name, settings)}
            try:
                with contextlib.redirect_stdout(sys.stderr):  # a model may print
                    estimate = advisor.estimate(
                        f"{MODELS / chosen_set / name}.py:workload",
                        overrides=[*settings, "gpu=h200", f"db_url={db_url}"],
                    )
            except Exception as error:  # kept in the table: an estimate that cannot answer
                row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0]}"
            else:
                row |= estimate.to_dict()
            print(json.dumps(row | {"seconds": time.perf_counter() - started}), flush=True)


def table() -> None:
    rows = [
        json.loads(line) for line in (HERE / "raw" / "estimates.jsonl").read_text().splitlines()
    ]
    print("| spec | measured peak allocated GB | estimate | error | measured steady device peak "
          "GB | estimate | error | not modelled |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    alloc, device = [], []
    for e in rows:
        if "error" in e:
            print(f"| {e['run']} | | the estimate failed: {e['error'][:80]} | | | | | |")
            continue
        m = json.loads((HERE / "raw" / "runs" / f"{e['run']}.json").read_text())["memory"]
        true_alloc = m["steady_peak_allocated_bytes"]
        true_device = m["steady_peak_reserved_bytes"] + m["context_bytes"]
        em = e["memory"]
        a = em["peak_allocated_bytes"] / true_alloc - 1
        d = em["device_peak_bytes"] / true_device - 1
        alloc.append(a)
        device.append(d)
        notes = "; ".join(e.get("unmodelled", []))
        print(f"| {e['run']} | {true_alloc / GB:.2f} | {em['peak_allocated_bytes'] / GB:.2f} "
              f"| {a:+.1%} | {true_device / GB:.2f} | {em['device_peak_bytes'] / GB:.2f} "
              f"| {d:+.1%} | {notes} |")  # fmt: skip
    for label, errors in (("peak allocated", alloc), ("device peak", device)):
        if errors:
            print(f"\n{label}: {len(errors)} specs, median |error| "
                  f"{statistics.median(abs(x) for x in errors):.1%}, worst over {max(errors):+.1%}, "
                  f"worst under {min(errors):+.1%}, within 5% and not 2% under: "
                  f"{sum(-0.02 <= x <= 0.05 for x in errors)}")  # fmt: skip


if __name__ == "__main__":
    {"estimate": estimate_all, "table": table}[sys.argv[1]]()
