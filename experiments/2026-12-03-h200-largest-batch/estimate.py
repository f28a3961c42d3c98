"""The largest batch `advisor estimate` gives for each line of budgets.txt, and for the three
catalog families bisected in ../2026-11-30-h200-memory (CATALOG): uncalibrated (a fresh
database), on this CPU, with the libraries' versions of the H200 (raw/versions.txt), public API.

    python3 estimate.py > raw/estimates-after.jsonl
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

import advisor

HERE = Path(__file__).resolve().parent
MODELS = HERE.parent / "2026-12-03-h200-unseen-models"
# (model, budget, settings) of ../2026-11-30-h200-memory's bisections (AdamW, foreach)
CATALOG = [
    ("resnet50", "24GiB", ["precision=fp32"]),
    ("gpt2", "40GiB", ["precision=bf16"]),
    ("vit_b_16", "24GiB", ["precision=bf16"]),
]


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
    asked = [(f"{MODELS / s / name}.py:workload", name, budget, settings)
             for _, s, name, budget, settings in lines()]  # fmt: skip
    asked += [(None, name, budget, [f"model={name}", "optimizer=adamw", *settings])
              for name, budget, settings in CATALOG]  # fmt: skip
    with tempfile.TemporaryDirectory() as empty:
        db_url = f"sqlite:///{empty}/fresh.sqlite"
        for source, name, budget, settings in asked:
            started = time.perf_counter()
            with contextlib.redirect_stdout(sys.stderr):  # a model may print (nanoGPT does)
                estimate = advisor.estimate(
                    source,
                    overrides=[*settings, "gpu=h200", f"gpu.memory={budget}", "margin=0",
                               f"db_url={db_url}"],
                )  # fmt: skip
            row = {"key": key(name, budget, settings), "largest_batch": estimate.largest_batch,
                   "largest_batch_sure": estimate.largest_batch_sure,
                   "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
