"""The largest batch estimated (raw/estimates-before.jsonl, raw/estimates-after.jsonl) against the
H200's bisection (raw/work/bisect-*.jsonl; for the catalog's three families
../2026-11-30-h200-memory/raw/truth.json), as a markdown table:

    python3 compare.py > table.md
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
CATALOG_TRUTH = {
    "resnet50 24GiB model=resnet50 optimizer=adamw precision=fp32": "truth-r50",
    "gpt2 40GiB model=gpt2 optimizer=adamw precision=bf16": "truth-gpt2",
    "vit_b_16 24GiB model=vit_b_16 optimizer=adamw precision=bf16": "truth-vit",
}


def truths() -> dict[str, tuple[int, int | None]]:
    """(largest that ran, smallest that did not) by spec key."""
    found = {}
    for path in sorted((HERE / "raw" / "work").glob("bisect-*.jsonl")):
        for row in map(json.loads, path.read_text().splitlines()):
            if "largest_ran" in row:
                found[row["key"]] = (row["largest_ran"], row["smallest_failed"])
    bisected = json.loads((HERE.parent / "2026-11-30-h200-memory/raw/truth.json").read_text())
    for key, name in CATALOG_TRUTH.items():
        found[key] = (bisected[name]["largest_ok"], bisected[name]["smallest_oom"])
    return found


def estimates(name: str) -> dict[str, dict]:
    path = HERE / "raw" / name
    return {row["key"]: row for row in map(json.loads, path.read_text().splitlines())}


def main() -> None:
    before, after = estimates("estimates-before.jsonl"), estimates("estimates-after.jsonl")
    print("| spec (budget) | H200: largest that ran / smallest OOM | estimate before | error "
          "| estimate after | error | after, by the upper side |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    within = {"before": 0, "after": 0}
    for key, (ran, failed) in truths().items():
        cells = []
        for label, table in (("before", before), ("after", after)):
            if key not in table:
                cells += ["", ""]
                continue
            error = table[key]["largest_batch"] / ran - 1
            within[label] += abs(error) <= 0.03
            cells += [str(table[key]["largest_batch"]), f"{error:+.1%}"]
        sure = after.get(key, {}).get("largest_batch_sure", "")
        print(f"| {key} | {ran} / {failed} | {' | '.join(cells)} | {sure} |")
    print(
        f"\nwithin 3% of the truth: before {within['before']}, after {within['after']}, "
        f"of {len(truths())}"
    )


if __name__ == "__main__":
    main()
