"""One spec of the grid estimated calibrated, leave one out, on the other 36's records as
device.sh's raw phase stored them (raw/calibrated/raw-*.jsonl): the checkpointed compiled
b64, the only spec whose alike trials do not recompute as it does.
    python one_left_out.py        (run with each code: PYTHONPATH=its copy)"""

import json
import sys
import tempfile
from pathlib import Path

import calibrated as c

import advisor

HERE = Path(__file__).parent
rows = c.grid()
said = {r["i"]: r for p in (HERE / "raw" / "calibrated").glob("raw-*.jsonl")
        for r in map(json.loads, p.open())}  # fmt: skip
i = next(i for i, r in enumerate(rows) if r["spec"]["checkpointing"] == "blocks")
row, m = rows[i], rows[i]["memory"]
with tempfile.TemporaryDirectory() as temp:
    others = [said[j]["record"] for j in range(len(rows)) if j != i]
    e = advisor.estimate(**c.settings(row), device="cuda", gpu="h200",
                         db_url=c.database_of(others, Path(temp), "leave"))  # fmt: skip
assert e.calibration is not None
steady = m["steady_peak_reserved_bytes"] + m["context_bytes"]
print(c.settings(row), f"calibrated on {e.calibration.trials} trials;",
      f"peak allocated {e.peak_allocated_bytes / m['steady_peak_allocated_bytes'] - 1:+.1%},",
      f"device peak {e.device_peak_bytes / steady - 1:+.1%}", file=sys.stdout)  # fmt: skip
