"""The same spec's steady reserve measured side by side (../2026-11-30-h200-memory ran several
trials at once on one GPU) against alone (every other H200 experiment: one trial at a time).

    python3 side_by_side.py > side_by_side.txt
"""

from __future__ import annotations

import collections
import json
import statistics
from pathlib import Path

EXPERIMENTS = Path(__file__).parent.parent
GiB = 2**30


def ok_uncapped(path: Path):
    for line in path.open():
        row = json.loads(line)
        spec = row.get("spec")
        if not isinstance(spec, dict) or row.get("status") != "ok" or not row.get("memory"):
            continue
        if spec.get("memory_cap_bytes") is None:
            yield row


def main() -> None:
    side = {
        r["spec"]["hash"]: r
        for r in ok_uncapped(EXPERIMENTS / "2026-11-30-h200-memory/raw/trials.jsonl")
    }
    alone = collections.defaultdict(list)
    for path in sorted(EXPERIMENTS.glob("*/raw/*.jsonl")):
        if path.parent.parent.name in ("2026-11-30-h200-memory", "2026-11-30-h200-reserve"):
            continue
        for r in ok_uncapped(path):
            alone[r["spec"]["hash"]].append(r["memory"]["steady_peak_reserved_bytes"])
    rows = []
    for h, r in side.items():
        if h not in alone:
            continue
        s, reserved = r["spec"], r["memory"]["steady_peak_reserved_bytes"]
        rows.append((reserved / statistics.median(alone[h]) - 1,
                     f"{s['model']} {s['precision']} ckpt={s['checkpointing']} b{s['batch_size']}",
                     [round(x / GiB, 2) for x in alone[h]], round(reserved / GiB, 2)))  # fmt: skip
    print(f"{len(rows)} of the {len(side)} side-by-side specs were also measured alone\n")
    print("| spec | alone, each run (GiB) | side by side | side / median alone |")
    print("|---|---|---|---|")
    for diff, name, runs, reserved in sorted(rows):
        print(f"| {name} | {', '.join(map(str, runs))} | {reserved} | {diff:+.1%} |")


if __name__ == "__main__":
    main()
