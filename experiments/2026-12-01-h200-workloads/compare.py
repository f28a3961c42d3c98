"""The built-in gpt2 and resnet50 workloads against plain loops written as their communities
write them, side by side on one GPU, alternating, REPS times each (public API only).

    python compare.py OUT_DIR gpt2|resnet50 [REPS]
"""

import json
import subprocess
import sys
from pathlib import Path

import advisor

SETTINGS = {
    "gpt2": dict(precision="bf16", optimizer="adamw_fused", compile=True, batch_size=32),
    "resnet50": dict(precision="bf16", channels_last=True, compile=True, batch_size=256),
}


def main():
    out, model = Path(sys.argv[1]), sys.argv[2]
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    here = Path(__file__).parent
    with open(out / "compare.jsonl", "a") as log:
        for rep in range(reps):
            result = advisor.run(
                model, device="cuda", db_url=f"sqlite:///{out}/results.sqlite", **SETTINGS[model]
            )
            m, t = result.memory, result.throughput
            row = {
                "loop": "advisor",
                "model": model,
                "rep": rep,
                "trial": result.id,
                "status": result.status.value,
                "samples_per_s": t.samples_per_s if t else None,
                "step_s_median": t.step_s_median if t else None,
                "step_s_iqr": t.step_s_iqr if t else None,
                "timed_steps": t.timed_steps if t else None,
                "steady_peak_allocated_bytes": m.steady_peak_allocated_bytes if m else None,
                "steady_peak_reserved_bytes": m.steady_peak_reserved_bytes if m else None,
                "params_bytes": m.params_bytes if m else None,
                "buffers_bytes": m.buffers_bytes if m else None,
                "wall_s": result.wall_s,
            }
            print(json.dumps(row), file=log, flush=True)
            print(json.dumps(row), flush=True)
            plain = subprocess.run(
                [sys.executable, str(here / "plain_loop.py"), model], capture_output=True, text=True
            )
            line = (
                plain.stdout.strip().splitlines()[-1]
                if plain.returncode == 0
                else json.dumps({"loop": "plain", "model": model, "error": plain.stderr[-2000:]})
            )
            row = {**json.loads(line), "rep": rep}
            print(json.dumps(row), file=log, flush=True)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
