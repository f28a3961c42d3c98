"""gpt2's estimate with the model built afresh for each fake step against one build copied, in
one process, alternating, three times each (README.md). From the repository root:
    python experiments/2026-12-03-cpu-estimate-builds/bench_build.py"""

import statistics
import time

import torch

import advisor
from advisor.estimation import fake_step
from advisor.trial.training import build_model, workload_of


def built_afresh(model):
    return build_model(workload_of(model), torch.device("meta"))


ways = {"fresh": built_afresh, "copied": fake_step._meta_model}
times: dict[str, list[float]] = {name: [] for name in ways}
for _ in range(3):
    for name, way in ways.items():
        fake_step.fake_step.cache_clear()
        fake_step._built_on_meta.cache_clear()
        fake_step._meta_model = way
        start = time.perf_counter()
        e = advisor.estimate("gpt2", batch_size=8, precision="bf16", gpu="a100_40gb",
                             db_url="sqlite:///estimate-bench.sqlite")  # fmt: skip
        times[name].append(time.perf_counter() - start)
        print(name, round(times[name][-1], 2), e.device_peak_bytes, e.largest_batch, flush=True)
for name, seconds in times.items():
    print(name, "median", round(statistics.median(seconds), 2), [round(s, 2) for s in seconds])
