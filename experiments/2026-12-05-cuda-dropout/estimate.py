"""The uncalibrated estimate (public API, an empty database, gpu=h200) of every spec measured on
the H200 that has a truth today, before and after CUDA's dropout and mask conversion were
emulated (this folder's README):
- issue 27's held-out and second sets (../2026-12-03-h200-unseen-models, measured 2026-12-03);
- the catalog's gpt2 grid (../2026-12-01-h200-gpt2-grid, today's gpt2: 5c3670d is before it).

    python estimate.py run OUT.jsonl [SET ...]     # sets: heldout second gpt2 (all if none)
    python estimate.py table BEFORE.jsonl AFTER.jsonl > table.md

Run with the libraries the truth was measured with (transformers 5.17.0, timm 1.0.29 on the
PYTHONPATH), as ../2026-12-03-h200-unseen-models/compare.py did."""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import advisor

EXPERIMENTS = Path(__file__).resolve().parents[1]
UNSEEN = EXPERIMENTS / "2026-12-03-h200-unseen-models"
GRID = EXPERIMENTS / "2026-12-01-h200-gpt2-grid" / "raw"
GRID_SETTINGS = ("batch_size", "grad_accum", "precision", "checkpointing", "optimizer", "compile")
GB = 1e9


def unseen(chosen: str) -> list[tuple[str, str, list[str], dict]]:
    """(set, run name, workload and settings, the H200's result) of each measured spec."""
    rows = []
    for line in (UNSEEN / "specs.txt").read_text().splitlines():
        if line.startswith(chosen + " "):
            _, name, *settings = line.split()
            run = "_".join([name, *settings]).replace("=", "-")
            path = UNSEEN / "raw" / "runs" / f"{run}.json"
            result = json.loads(path.read_text()) if path.exists() else {}
            if result.get("status") == "ok":
                source = f"workload={UNSEEN / chosen / name}.py:workload"
                rows.append((chosen, run, [source, *settings], result))
    return rows


def gpt2_grid() -> list[tuple[str, str, list[str], dict]]:
    """Each ok spec of the gpt2 grid once (its newest run)."""
    newest: dict[str, tuple[str, dict]] = {}
    for path in sorted(GRID.glob("chunk-*/run-*.json")):
        try:
            result = json.loads(path.read_text())
        except json.JSONDecodeError:
            continue
        if result.get("status") != "ok":
            continue
        spec = result["spec"]
        settings = [f"{k}={str(spec[k]).lower()}" for k in GRID_SETTINGS]
        key = "gpt2_" + "_".join(settings).replace("=", "-")
        if key not in newest or result["created_at"] > newest[key][1]["created_at"]:
            newest[key] = (" ".join(settings), result)
    return [("gpt2", key, ["model=gpt2", *s.split()], r) for key, (s, r) in sorted(newest.items())]


def specs(sets: list[str]) -> list[tuple[str, str, list[str], dict]]:
    rows = []
    for chosen in sets:
        rows += gpt2_grid() if chosen == "gpt2" else unseen(chosen)
    return rows


def run(out: str, sets: list[str]) -> None:
    with tempfile.TemporaryDirectory() as empty, open(out, "a") as sink:
        db_url = f"sqlite:///{empty}/fresh.sqlite"  # no history: the estimate is uncalibrated
        for chosen, name, overrides, _ in specs(sets):
            started = time.perf_counter()
            row: dict = {"set": chosen, "run": name}
            try:
                estimate = advisor.estimate(overrides=[*overrides, "gpu=h200", f"db_url={db_url}"])
            except Exception as error:  # kept in the table: an estimate that cannot answer
                row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0]}"
            else:
                memory = estimate.to_dict()["memory"]
                row |= {k: memory[k] for k in ("peak_allocated_bytes", "device_peak_bytes")}
            sink.write(json.dumps(row | {"seconds": time.perf_counter() - started}) + "\n")
            sink.flush()


def errors(estimates: dict[str, dict], truth: dict[str, dict]) -> dict[str, tuple[float, float]]:
    """Each spec's (peak allocated, device peak) error: estimate / measured - 1."""
    out = {}
    for run, e in estimates.items():
        if "error" in e or run not in truth:
            continue
        m = truth[run]["memory"]
        device = m["steady_peak_reserved_bytes"] + m["context_bytes"]
        out[run] = (e["peak_allocated_bytes"] / m["steady_peak_allocated_bytes"] - 1,
                    e["device_peak_bytes"] / device - 1)  # fmt: skip
    return out


def table(before_path: str, after_path: str) -> None:
    truth = {name: result for _, name, _, result in specs(["heldout", "second", "gpt2"])}
    read = [{json.loads(line)["run"]: json.loads(line) for line in open(p)}
            for p in (before_path, after_path)]  # fmt: skip
    before, after = errors(read[0], truth), errors(read[1], truth)
    print("| set | spec | peak allocated before | after | device peak before | after |")
    print("|---|---|---:|---:|---:|---:|")
    for run in sorted(after, key=lambda r: (read[1][r]["set"], r)):
        b = before.get(run)
        cells = [f"{b[0]:+.1%}" if b else "failed", f"{after[run][0]:+.1%}",
                 f"{b[1]:+.1%}" if b else "failed", f"{after[run][1]:+.1%}"]  # fmt: skip
        print(f"| {read[1][run]['set']} | {run} | " + " | ".join(cells) + " |")
    for chosen in ("heldout", "second", "gpt2"):
        for label, figures in (("before", before), ("after", after)):
            runs = [r for r in figures if read[1].get(r, {}).get("set") == chosen]
            if not runs:
                continue
            for i, what in enumerate(("peak allocated", "device peak")):
                errs = [figures[r][i] for r in runs]
                print(f"\n{chosen} {label}, {what}: {len(errs)} specs, median |error| "
                      f"{statistics.median(abs(x) for x in errs):.1%}, worst under {min(errs):+.1%}, "
                      f"worst over {max(errs):+.1%}, within [-2%, +5%]: "
                      f"{sum(-0.02 <= x <= 0.05 for x in errs)}")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3:] or ["heldout", "second", "gpt2"])
    else:
        table(sys.argv[2], sys.argv[3])
