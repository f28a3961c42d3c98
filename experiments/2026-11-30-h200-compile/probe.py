"""What torch.compile costs one trial on the H200, to size a benchmark space with compile in it.

    python3 probe.py OUT_DIR

resnet50, batch 256, fp16, channels_last, AdamW: compile off; then compile on with a cold
inductor cache (TORCHINDUCTOR_CACHE_DIR, a fresh directory); then compile on again, the cache
now warm. Each trial in its own worker, as `advisor sweep` and the grid run them; wall_s is
the worker's whole life (start, compile, warm-up, timed steps). OUT_DIR/trials.jsonl.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from advisor.config import MeasureConfig, load, trial_spec
from advisor.runner import run_trial

SPEC = ["model=resnet50", "device=cuda", "batch_size=256", "precision=fp16", "channels_last=true"]


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-")  # cold
    with (out / "trials.jsonl").open("w") as lines:
        for tag, extra in [("eager", []), ("compile, cold cache", ["compile=true"]),
                           ("compile, warm cache", ["compile=true"])]:  # fmt: skip
            result = run_trial(trial_spec(load([*SPEC, *extra])), MeasureConfig(), 540)
            lines.write(json.dumps({"tag": tag, **result.to_dict()}) + "\n")
            lines.flush()
            t, m = result.throughput, result.memory
            print(f"{tag}: {result.status.value}, wall {result.wall_s:.0f} s, "
                  f"{t.samples_per_s if t else 0:.0f}/s, device peak "
                  f"{m.device_peak_bytes / 2**30 if m else 0:.2f} GiB", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
