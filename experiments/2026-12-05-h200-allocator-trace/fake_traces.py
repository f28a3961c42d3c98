"""The estimate's fake step of each spec in specs.txt, with the allocations it would make in
order (what advisor replays through its model of the caching allocator), written as JSON lines:
    python fake_traces.py OUT.jsonl [JOBS]
Internal API on purpose: this folder asks whether the fake step's allocations are the real
step's, which the public estimate does not show (it gives the replay's result only)."""

import dataclasses
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).parent
UNSEEN = HERE.parent / "2026-12-03-h200-unseen-models"


def specs() -> list[tuple[str, list[str]]]:
    rows = []
    for line in (HERE / "specs.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            _, group, name, *settings = line.split()
            rows.append((f"{name} {' '.join(settings)}",
                         [f"workload={UNSEEN / group / name}.py:workload", "device=cuda",
                          *settings]))  # fmt: skip
    return rows


def one(row: tuple[str, list[str]]) -> dict:
    from advisor import config
    from advisor.estimation.fake_step import fake_step, replayed_reserved

    label, overrides = row
    start = time.perf_counter()
    try:
        step = fake_step(config.trial_spec(config.load(overrides)))
    except Exception as error:  # said in the output, the other specs go on
        return {"spec": label, "error": f"{type(error).__name__}: {error}"[:400]}
    fields = dataclasses.asdict(step)
    fields.pop("top_modules")
    return {"spec": label, "seconds": round(time.perf_counter() - start, 1),
            "replayed_reserved": replayed_reserved(step),
            "peak_allocated": step.peak_allocated_bytes, "step": fields}  # fmt: skip


if __name__ == "__main__":
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    with ProcessPoolExecutor(jobs) as pool, open(sys.argv[1], "w") as out:
        for result in pool.map(one, specs()):
            out.write(json.dumps(result) + "\n")
            print(result["spec"], result.get("error") or result["replayed_reserved"], flush=True)
