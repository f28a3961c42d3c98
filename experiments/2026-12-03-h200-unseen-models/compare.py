"""advisor's uncalibrated estimate (fake tensors, this machine's CPU, a fresh database) against
the H200's measurement of the same spec (raw/runs/*.json, written by measure.sh), public API only.

    python3 compare.py estimate heldout > raw/estimates-heldout.jsonl   # the CPU side
    python3 compare.py table heldout > table-heldout.md                 # both sides, side by side
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import advisor

HERE = Path(__file__).resolve().parent
GB = 1e9


def specs(chosen_set: str) -> list[tuple[str, list[str]]]:
    """(workload file, settings) of each line of specs.txt in the set."""
    rows = []
    for line in (HERE / "specs.txt").read_text().splitlines():
        if line.startswith(chosen_set + " "):
            _, name, *settings = line.split()
            rows.append((name, settings))
    return rows


def run_name(name: str, settings: list[str]) -> str:
    """The file name measure.sh gives a spec's run."""
    return "_".join([name, *settings]).replace("=", "-")


def estimate_all(chosen_set: str) -> None:
    with tempfile.TemporaryDirectory() as empty:
        db_url = f"sqlite:///{empty}/fresh.sqlite"  # no history: the estimate is uncalibrated
        for name, settings in specs(chosen_set):
            started = time.perf_counter()
            source = f"{HERE / chosen_set / name}.py:workload"
            row = {"run": run_name(name, settings)}
            try:
                estimate = advisor.estimate(
                    source, overrides=[*settings, "gpu=h200", f"db_url={db_url}"]
                )
            except Exception as error:  # kept in the table: an estimate that cannot answer
                row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0]}"
            else:
                row |= estimate.to_dict()
            print(json.dumps(row | {"seconds": time.perf_counter() - started}), flush=True)


def measured(run: str) -> dict | None:
    path = HERE / "raw" / "runs" / f"{run}.json"
    if not path.exists():
        return None
    result = json.loads(path.read_text())
    return result if result["status"] == "ok" else None


def table(chosen_set: str) -> None:
    estimates = [json.loads(line) for line in (HERE / "raw" / f"estimates-{chosen_set}.jsonl")
                 .read_text().splitlines()]  # fmt: skip
    print("| spec | measured peak allocated GB | estimate | error | measured steady device peak "
          "GB | estimate | error | estimate s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    alloc, device = [], []
    for e in estimates:
        if "error" in e:
            print(f"| {e['run']} | | the estimate failed: {e['error'][:80]} | | | | | |")
            continue
        m = measured(e["run"])
        if m is None:
            print(f"| {e['run']} | not measured | | | | | | |")
            continue
        mm, em = m["memory"], e["memory"]
        true_alloc = mm["steady_peak_allocated_bytes"]
        true_device = mm["steady_peak_reserved_bytes"] + mm["context_bytes"]
        a = em["peak_allocated_bytes"] / true_alloc - 1
        d = em["device_peak_bytes"] / true_device - 1
        alloc.append(a)
        device.append(d)
        print(f"| {e['run']} | {true_alloc / GB:.2f} | {em['peak_allocated_bytes'] / GB:.2f} "
              f"| {a:+.1%} | {true_device / GB:.2f} | {em['device_peak_bytes'] / GB:.2f} "
              f"| {d:+.1%} | {e['seconds']:.1f} |")  # fmt: skip
    for label, errors in (("peak allocated", alloc), ("device peak", device)):
        if errors:
            print(f"\n{label}: {len(errors)} specs, median |error| "
                  f"{statistics.median(abs(x) for x in errors):.1%}, worst over {max(errors):+.1%}, "
                  f"worst under {min(errors):+.1%}, within 5% and not 2% under: "
                  f"{sum(-0.02 <= x <= 0.05 for x in errors)}")  # fmt: skip


if __name__ == "__main__":
    verb, chosen = sys.argv[1], sys.argv[2]
    {"estimate": estimate_all, "table": table}[verb](chosen)
