"""The uncalibrated estimate (public API, an empty database, gpu=h200) of every spec measured on
a GPU that has a truth today, before and after CUDA's dropout and mask conversion were emulated
(this folder's README):
- issue 27's held-out and second sets (../2026-12-03-h200-unseen-models, measured 2026-12-03);
- the catalog's gpt2 grid (../2026-12-01-h200-gpt2-grid, today's gpt2: 5c3670d is before it);
- this folder's third set (specs-third.txt, measured by measure.sh into raw/third).

    python estimate.py run OUT.jsonl [SET ...]     # sets: heldout second gpt2 third (all if
                                                   # none); ESTIMATE_SHARD=i/n: every n-th
    python estimate.py table BEFORE.jsonl AFTER.jsonl > table.md

Run with the libraries the truth was measured with (torch 2.11, transformers 5.17.0)."""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import advisor

HERE = Path(__file__).resolve().parent
UNSEEN = HERE.parent / "2026-12-03-h200-unseen-models"
GRID = HERE.parent / "2026-12-01-h200-gpt2-grid" / "raw"
GRID_SETTINGS = ("batch_size", "grad_accum", "precision", "checkpointing", "optimizer", "compile")
SETS = ("heldout", "second", "gpt2", "third")


def run_name(name: str, settings: list[str]) -> str:
    return "_".join([name, *settings]).replace("=", "-")


def listed(path: Path, prefix: str, folder: Path) -> list[tuple[str, list[str]]]:
    """(run name, workload and settings) of each spec line of a file that starts with prefix."""
    rows = []
    for line in path.read_text().splitlines():
        if line.startswith(prefix + " "):
            _, name, *settings = line.split()
            rows.append(
                (run_name(name, settings), [f"workload={folder / name}.py:workload", *settings])
            )
    return rows


def gpt2_grid() -> list[tuple[str, list[str], Path]]:
    """Each ok spec of the gpt2 grid once: its newest run."""
    newest: dict[str, tuple[list[str], Path, str]] = {}
    for path in sorted(GRID.glob("chunk-*/run-*.json")):
        try:
            result = json.loads(path.read_text())
        except json.JSONDecodeError:
            continue
        if result.get("status") != "ok":
            continue
        settings = [f"{k}={str(result['spec'][k]).lower()}" for k in GRID_SETTINGS]
        name = run_name("gpt2", settings)
        if name not in newest or result["created_at"] > newest[name][2]:
            newest[name] = (["model=gpt2", *settings], path, result["created_at"])
    return [(name, o, p) for name, (o, p, _) in sorted(newest.items())]


def specs(chosen: str) -> list[tuple[str, list[str], Path]]:
    """(run name, overrides, the measured result's file) of each spec of a set."""
    if chosen == "gpt2":
        return gpt2_grid()
    if chosen == "third":
        lanes = [listed(HERE / "specs-third.txt", lane, HERE / "third") for lane in "ab"]
        return sorted(
            (n, o, HERE / "raw" / "third" / f"{n}.json") for rows in lanes for n, o in rows
        )
    rows = listed(UNSEEN / "specs.txt", chosen, UNSEEN / chosen)
    return [(n, o, UNSEEN / "raw" / "runs" / f"{n}.json") for n, o in rows]


def run(out: str, sets: list[str]) -> None:
    rows = [(s, *row) for s in sets for row in specs(s)]
    shard, shards = map(int, os.environ.get("ESTIMATE_SHARD", "0/1").split("/"))
    with tempfile.TemporaryDirectory() as empty, open(out, "a") as sink:
        db_url = f"sqlite:///{empty}/fresh.sqlite"  # no history: the estimate is uncalibrated
        for chosen, name, overrides, _ in rows[shard::shards]:
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


def measured(path: Path) -> dict | None:
    if not path.is_file() or not path.stat().st_size:
        return None
    result = json.loads(path.read_text())
    return result["memory"] if result.get("status") == "ok" else None


def table(before_path: str, after_path: str) -> None:
    truth = {name: measured(path) for s in SETS for name, _, path in specs(s)}
    read = [{json.loads(line)["run"]: json.loads(line) for line in Path(p).read_text().splitlines()}
            for p in (before_path, after_path)]  # fmt: skip

    def error(estimate: dict | None, name: str) -> tuple[float, float] | None:
        m = truth.get(name)
        if estimate is None or "error" in estimate or m is None:
            return None
        device = m["steady_peak_reserved_bytes"] + m["context_bytes"]
        return (estimate["peak_allocated_bytes"] / m["steady_peak_allocated_bytes"] - 1,
                estimate["device_peak_bytes"] / device - 1)  # fmt: skip

    print("| set | spec | peak allocated before | after | device peak before | after |")
    print("|---|---|---:|---:|---:|---:|")
    summary: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for s in SETS:
        for name, _, _ in specs(s):
            if truth.get(name) is None:
                continue
            cells = []
            for label, estimates in (("before", read[0]), ("after", read[1])):
                e = estimates.get(name)
                err = error(e, name)
                if err is not None:
                    summary.setdefault((s, label), []).append(err)
                cells.append(
                    err if err is not None else (e or {}).get("error", "not estimated")[:60]
                )
            shown = [f"{c[i]:+.1%}" if isinstance(c, tuple) else c for i in (0, 1) for c in cells]
            print(f"| {s} | {name} | " + " | ".join(shown) + " |")
    for (s, label), errs in summary.items():
        for i, what in enumerate(("peak allocated", "device peak")):
            e = [x[i] for x in errs]
            print(f"\n{s} {label}, {what}: {len(e)} specs, median |error| "
                  f"{statistics.median(abs(x) for x in e):.1%}, worst under {min(e):+.1%}, worst "
                  f"over {max(e):+.1%}, within [-2%, +5%]: {sum(-0.02 <= x <= 0.05 for x in e)}")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3:] or list(SETS))
    elif len(sys.argv) == 4 and sys.argv[1] == "table":
        table(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
