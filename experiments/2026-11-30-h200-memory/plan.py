"""The specs of run.py, each with the memory to set aside for it while trials share the H200.

    python3 plan.py > plan.json

Run here, without a GPU: the reserve is the uncalibrated estimate's device peak x 1.3 + 2 GiB,
only a scheduling hint (run.py retries alone any uncapped trial that ran out of memory).
"""

from __future__ import annotations

import itertools
import json

from advisor.config import load, trial_spec
from advisor.estimate import estimate
from advisor.memory_model import Target

GiB = 2**30
BATCHES = {"resnet50": (64, 128, 256), "vit_b_16": (32, 64, 128), "gpt2": (2, 4, 8)}


def main() -> None:
    plan = []
    for model, batches in BATCHES.items():
        for precision, ckpt, batch in itertools.product(
            ("fp32", "bf16", "fp16"), ("none", "blocks"), batches
        ):
            overrides = [
                "device=cuda", f"model={model}", f"batch_size={batch}",
                f"precision={precision}", f"checkpointing={ckpt}",
            ]  # fmt: skip
            spec = trial_spec(load(overrides))
            peak = estimate(spec, Target("h200", 140 * GiB, 0.0)).device_peak_bytes
            plan.append({"overrides": overrides, "reserve_bytes": int(peak * 1.3 + 2 * GiB)})
    print(json.dumps(plan, indent=1))


if __name__ == "__main__":
    main()
