"""partitions.py's real and fake records of one spec side by side: each graph's nodes and what
its forward keeps; the real step's phases (allocated at each phase's start, the peak of the
phase before it) beside the fake step's figures.

    python compare.py NAME [RAW]
"""

import json
import sys
from pathlib import Path

name = sys.argv[1]
raw = Path(sys.argv[2] if len(sys.argv) > 2 else Path(__file__).resolve().parent / "raw")
real = json.loads((raw / f"{name}-real.json").read_text())
fake = json.loads((raw / f"{name}-fake.json").read_text())
GB = 1e9
print(f"{name}: graphs real {len(real['graphs']) // 2}, fake {len(fake['graphs']) // 2}")
print(" real: nodes, saved GB  |  fake: nodes, saved GB")
for i in range(max(len(real["graphs"]), len(fake["graphs"]))):
    r = real["graphs"][i] if i < len(real["graphs"]) else None
    f = fake["graphs"][i] if i < len(fake["graphs"]) else None
    side = lambda g: f"{g['nodes']:5d} {g['saved_bytes'] / GB:7.3f}" if g else " " * 13  # noqa: E731
    print(f"  {'bwd' if (r or f)['backward'] else 'fwd'} {side(r)}  |  {side(f)}")
print(" real steps (phase: allocated at its start, peak of the phase before), GB:")
for phases in real["steps"]:
    print(
        "  "
        + ", ".join(
            f"{p['phase']} {p['allocated'] / GB:.3f} ({p['peak_before'] / GB:.3f})" for p in phases
        )
    )
print(
    " fake: "
    + ", ".join(
        f"{k} {fake[k] / GB:.3f}"
        for k in (
            "passes_peak",
            "update_peak",
            "activations",
            "params",
            "grads",
            "optimizer_state",
            "inputs",
        )
    )
)
