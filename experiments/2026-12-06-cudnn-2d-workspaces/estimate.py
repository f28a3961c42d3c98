"""The uncalibrated estimate (public API, an empty database, for the truth's card) of each spec of
specs.txt, against its measurement (measure.sh's raw/runs/NAME.json).

    python estimate.py run OUT.jsonl          # ESTIMATE_SHARD=i/n: every n-th spec; ESTIMATE_GPU:
                                              # the card (advisor's name, h100_80gb unless set)
    python estimate.py table BEFORE.jsonl AFTER.jsonl > table.md"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import advisor

HERE = Path(__file__).resolve().parent


def specs() -> list[tuple[str, list[str]]]:
    """(run name, overrides) of each spec line, named as measure.sh names its result."""
    rows = []
    for line in (HERE / "specs.txt").read_text().splitlines():
        if line[:2] in ("a ", "b "):
            _, name, *settings = line.split()
            run = "_".join([name, *settings]).replace("=", "-")
            rows.append((run, [f"workload={HERE / 'workloads.py'}:{name}", *settings]))
    return rows


def run(out: str) -> None:
    shard, shards = map(int, os.environ.get("ESTIMATE_SHARD", "0/1").split("/"))
    gpu = os.environ.get("ESTIMATE_GPU", "h100_80gb")
    with tempfile.TemporaryDirectory() as empty, open(out, "a") as sink:
        for name, overrides in specs()[shard::shards]:
            started, row = time.perf_counter(), {"run": name}
            try:
                estimate = advisor.estimate(
                    overrides=[*overrides, f"gpu={gpu}", f"db_url=sqlite:///{empty}/e.sqlite"]
                )
            except Exception as error:  # kept in the table: an estimate that cannot answer
                row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0]}"
            else:
                memory = estimate.to_dict()["memory"]
                row |= {k: memory[k] for k in ("peak_allocated_bytes", "device_peak_bytes")}
            sink.write(json.dumps(row | {"seconds": time.perf_counter() - started}) + "\n")
            sink.flush()


def table(before_path: str, after_path: str) -> None:
    read = [{json.loads(line)["run"]: json.loads(line) for line in Path(p).read_text().splitlines()}
            for p in (before_path, after_path)]  # fmt: skip
    print("| spec | peak allocated before | after | device peak before | after |")
    print("|---|---:|---:|---:|---:|")
    for name, _ in specs():
        path = HERE / "raw" / "runs" / f"{name}.json"
        result = json.loads(path.read_text()) if path.is_file() and path.stat().st_size else {}
        if result.get("status") != "ok":
            print(f"| {name} | not measured: {result.get('status', 'no result')} | | | |")
            continue
        m = result["memory"]
        truth = (
            m["steady_peak_allocated_bytes"],
            m["steady_peak_reserved_bytes"] + m["context_bytes"],
        )
        cells = []
        for i, key in enumerate(("peak_allocated_bytes", "device_peak_bytes")):
            for estimates in read:
                e = estimates.get(name, {})
                cells.append(
                    f"{e[key] / truth[i] - 1:+.1%}" if key in e else e.get("error", "-")[:50]
                )
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    {"run": lambda: run(sys.argv[2]), "table": lambda: table(sys.argv[2], sys.argv[3])}[
        sys.argv[1]
    ]()
