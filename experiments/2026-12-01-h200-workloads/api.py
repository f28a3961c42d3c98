"""The Python API on one workload: run, estimate, sweep (a small space) and recommend.

python api.py WORKLOAD DEVICE DB_URL   (prints one JSON line)
"""

import json
import sys

import advisor


def main():
    workload, device, db_url = sys.argv[1:4]
    common = dict(
        device=device, db_url=db_url, study_db_url=db_url.replace(".sqlite", "-optuna.sqlite")
    )
    result = advisor.run(workload, batch_size=8, precision="bf16", **common)
    estimate = advisor.estimate(
        workload, batch_size=8, precision="bf16", gpu={"memory": "16GiB"}, db_url=db_url
    )
    outcome = advisor.sweep(
        workload,
        batch_size=8,
        trials=2,
        gpu={"memory": "16GiB"},
        space={
            "batch_sizes": [8, 16],
            "precision": ["bf16"],
            "compile": [False],
            "expandable_segments": [False],
            "checkpointing": ["none"],
            "grad_accum": [1],
        },
        **common,
    )
    rec = advisor.recommend(workload, device=device, gpu={"memory": "16GiB"}, db_url=db_url)
    print(
        json.dumps(
            {
                "workload": workload,
                "run": {
                    "status": result.status.value,
                    "samples_per_s": result.throughput.samples_per_s,
                    "steady_peak_allocated_bytes": result.memory.steady_peak_allocated_bytes,
                },
                "estimate": {
                    "peak_allocated_bytes": estimate.peak_allocated_bytes,
                    "device_peak_bytes": estimate.device_peak_bytes,
                    "largest_batch": estimate.largest_batch,
                },
                "sweep": {
                    "id": outcome.sweep_id,
                    "stop": outcome.stop_reason,
                    "baseline": outcome.baseline.spec.batch_size if outcome.baseline else None,
                    "best": outcome.recommendation.best.spec.batch_size
                    if outcome.recommendation.best
                    else None,
                },
                "recommend": rec.best.id if rec.best else None,
            }
        )
    )


if __name__ == "__main__":
    main()
