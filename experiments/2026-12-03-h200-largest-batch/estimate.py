"""The largest batch `advisor estimate` gives for each line of budgets.txt: uncalibrated (a fresh
database), on this CPU, with the libraries' versions of the H200 (see README.md), public API.

    python3 estimate.py > raw/estimates.jsonl
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import advisor

HERE = Path(__file__).resolve().parent
MODELS = HERE.parent / "2026-12-03-h200-unseen-models"


def lines() -> list[tuple[str, str, str, str, list[str]]]:
    """(lane, set, file, budget, settings) of each line of budgets.txt."""
    rows = []
    for line in (HERE / "budgets.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            lane, chosen_set, name, budget, *settings = line.split()
            rows.append((lane, chosen_set, name, budget, settings))
    return rows


def key(name: str, budget: str, settings: list[str]) -> str:
    return " ".join([name, budget, *settings])


def main() -> None:
    with tempfile.TemporaryDirectory() as empty:
        db_url = f"sqlite:///{empty}/fresh.sqlite"
        for _, chosen_set, name, budget, settings in lines():
            started = time.perf_counter()
            estimate = advisor.estimate(
                f"{MODELS / chosen_set / name}.py:workload",
                overrides=[*settings, "gpu=h200", f"gpu.memory={budget}", "margin=0",
                           f"db_url={db_url}"],
            )  # fmt: skip
            row = {"key": key(name, budget, settings), "largest_batch": estimate.largest_batch,
                   "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip
            print(json.dumps(row), flush=True)
            print(row, file=sys.stderr)


if __name__ == "__main__":
    main()
