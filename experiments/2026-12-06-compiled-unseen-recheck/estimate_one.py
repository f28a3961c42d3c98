"""One uncalibrated estimate through the public API, as a JSON line (a fresh SQLite database, the
H200 as the target, as ../2026-12-03-compiled-estimate-same-torch/estimate.py makes them).

    python estimate_one.py WORKLOAD SETTING=VALUE...
"""

import json
import sys
import tempfile
import time

import advisor

workload, *settings = sys.argv[1:]
started = time.perf_counter()
with tempfile.TemporaryDirectory() as empty:
    estimate = advisor.estimate(
        workload, overrides=[*settings, "gpu=h200", f"db_url=sqlite:///{empty}/fresh.sqlite"]
    )
print(json.dumps({"workload": workload, "settings": settings, "seconds": round(time.perf_counter() - started, 1)} | estimate.to_dict()))  # fmt: skip
