"""Where a compiled estimate of the 0.5B held-out model spends its time: cProfile over
advisor.estimate (public API), the cumulative seconds of the phases named below.

    python profile_estimate.py > raw/profile-compiled.txt
"""

import cProfile
import pstats
import time
from pathlib import Path

import advisor

WORKLOAD = Path(__file__).parents[1] / "2026-12-03-h200-unseen-models/heldout/qwen2_0_5b.py"
PHASES = {  # (file suffix, function): what it is
    ("estimation/fake_step.py", "fake_step"): "advisor's fake steps, all of them",
    ("_dynamo/convert_frame.py", "_compile"): "dynamo: tracing and compiling frames",
    ("_functorch/aot_autograd.py", "aot_module_simplified"): "AOTAutograd: joint graph to "
    "forward and backward",
    ("estimation/compiled_step.py", "_partitioned"): "of it, inductor's partitioner",
    ("estimation/inductor_buffers.py", "count_buffers"): "counting the graphs' buffers",
}

profile = cProfile.Profile()
started = time.perf_counter()
profile.enable()
answer = advisor.estimate(workload=f"{WORKLOAD}:workload", batch_size=8, precision="bf16",
                          compile=True, gpu="h200", db_url="sqlite://")  # fmt: skip
profile.disable()
print(f"estimate under the profiler: {time.perf_counter() - started:.1f} s; largest batch "
      f"{answer.largest_batch}")  # fmt: skip
stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
for (file, _, function), (_, calls, _, cumulative, _) in stats.items():
    for (suffix, name), what in PHASES.items():
        if file.endswith(suffix) and function == name:
            print(f"{what}: {cumulative:.1f} s in {calls} calls")
