"""The uncalibrated estimate (public API, an empty database, for the truth's card) of each spec of
specs.txt, against its measurement (measure.sh's raw/runs/NAME.json).

    python estimate.py run OUT.jsonl    # ESTIMATE_SHARD=i/n: every n-th spec; ESTIMATE_GPU: the
                                        # card (advisor's name, h100_80gb unless set)
    python estimate.py table ESTIMATES.jsonl [RUNS] > table.md   # RUNS: the measurements'
                                        # folder, raw/runs unless given (raw/again/runs)

The range and the largest batch by its upper side are the code's that ran the estimate."""

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
                said = estimate.to_dict()
                row |= {k: said["memory"][k] for k in ("peak_allocated_bytes", "device_peak_bytes")}
                row |= {k: said[k] for k in ("device_peak_range_bytes", "largest_batch",
                                             "largest_batch_sure")}  # fmt: skip
            sink.write(json.dumps(row | {"seconds": time.perf_counter() - started}) + "\n")
            sink.flush()


def table(path: str, runs: Path = HERE / "raw" / "runs") -> None:
    estimates = {
        json.loads(line)["run"]: json.loads(line) for line in Path(path).read_text().splitlines()
    }
    print(
        "| spec | peak allocated | device peak | the truth above the estimate | the range's upper side |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, _ in specs():
        path_ = runs / f"{name}.json"
        result = json.loads(path_.read_text()) if path_.is_file() and path_.stat().st_size else {}
        e = estimates.get(name, {})
        if result.get("status") != "ok" or "device_peak_bytes" not in e:
            print(
                f"| {name} | not measured or estimated: {result.get('status')} {e.get('error', '')[:60]} | | | |"
            )
            continue
        m = result["memory"]
        device = m["steady_peak_reserved_bytes"] + m["context_bytes"]
        above = device / e["device_peak_bytes"] - 1
        upper = e["device_peak_range_bytes"][1] / e["device_peak_bytes"] - 1
        print(
            f"| {name} | {e['peak_allocated_bytes'] / m['steady_peak_allocated_bytes'] - 1:+.1%} | "
            f"{e['device_peak_bytes'] / device - 1:+.1%} | {above:+.1%} | {upper:+.1%} |"
        )


if __name__ == "__main__":
    {
        "run": lambda: run(sys.argv[2]),
        "table": lambda: table(sys.argv[2], *(Path(p) for p in sys.argv[3:4])),
    }[sys.argv[1]]()
