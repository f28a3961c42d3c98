"""Each spec of the accuracy set: side by side (../2026-11-30-h200-memory) against alone (here),
and alone on the other GPU where that ran too.   python3 compare.py > compare.txt"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

HERE = Path(__file__).parent
SIDE_BY_SIDE = HERE.parent / "2026-11-30-h200-memory" / "raw" / "trials.jsonl"
GiB = 2**30


def steady(row: dict) -> float:
    m = row["memory"]
    return (m["steady_peak_reserved_bytes"] + m["context_bytes"]) / GiB


def name(row: dict) -> str:
    s = row["spec"]
    return f"{s['model']} {s['precision']} ckpt={s['checkpointing']} b{s['batch_size']}"


def main() -> None:
    side = {r["spec"]["hash"]: r for r in map(json.loads, SIDE_BY_SIDE.open())
            if r["tag"] == "accuracy" and r["status"] == "ok"}  # fmt: skip
    alone: dict[str, dict[str, dict]] = {}
    for path in sorted((HERE / "raw").glob("trials-lane*.jsonl")):
        for r in map(json.loads, path.open()):
            alone.setdefault(r["spec"]["hash"], {})[r["tag"]] = r
    print(
        "steady device peak (reserved + context), GiB: side by side | alone | alone again "
        "(other GPU); peak allocated, side by side / alone"
    )
    moved, again = [], []
    for h, runs in sorted(alone.items(), key=lambda kv: name(kv[1]["alone"])):
        a = runs["alone"]
        s = side[h]
        d = steady(a) / steady(s) - 1
        moved.append(d)
        line = f"{name(a):36s} {steady(s):6.2f} | {steady(a):6.2f} ({d:+.1%})"
        if "again" in runs:
            d2 = steady(runs["again"]) / steady(a) - 1
            again.append(d2)
            line += f" | {steady(runs['again']):6.2f} ({d2:+.1%})"
        alloc = (
            a["memory"]["steady_peak_allocated_bytes"] / s["memory"]["steady_peak_allocated_bytes"]
            - 1
        )
        print(f"{line}; allocated {alloc:+.2%}")
    print(f"\nalone vs side by side, {len(moved)} specs: median abs {statistics.median(map(abs, moved)):.1%}, "
          f"range {min(moved):+.1%} to {max(moved):+.1%}")  # fmt: skip
    print(f"alone on one GPU vs alone on the other, {len(again)} specs: median abs "
          f"{statistics.median(map(abs, again)):.1%}, range {min(again):+.1%} to {max(again):+.1%}")  # fmt: skip


if __name__ == "__main__":
    main()
