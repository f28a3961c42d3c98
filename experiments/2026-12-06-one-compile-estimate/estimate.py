"""One uncalibrated estimate (public API, an empty database, gpu=h200), its seconds and figures
as one JSON line.

    python estimate.py MODEL SETTING=VALUE...   # e.g. gpt2 batch_size=8 precision=bf16 compile=true
"""

import contextlib
import io
import json
import sys
import tempfile
import time

import advisor

model, *settings = sys.argv[1:]
t = time.perf_counter()
with tempfile.TemporaryDirectory() as d, contextlib.redirect_stdout(io.StringIO()):
    e = advisor.estimate(model, overrides=[*settings, "gpu=h200", f"db_url=sqlite:///{d}/x.db"])
d = e.to_dict()
print(
    json.dumps(
        {
            "file": advisor.__file__,
            "s": round(time.perf_counter() - t, 1),
            "peak": d["memory"]["peak_allocated_bytes"],
            "device": d["memory"]["device_peak_bytes"],
            "largest": d["largest_batch"],
            "sure": d["largest_batch_sure"],
            "verdict": d["verdict"],
            "notes": d["notes"],
        }
    )
)
