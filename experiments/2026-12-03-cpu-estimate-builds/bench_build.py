import time, statistics, torch
import advisor
from advisor.estimation import fake_step as fs
from advisor.trial.training import build_model, workload_of
fresh = lambda model: build_model(workload_of(model), torch.device("meta"))
cached = fs._meta_model
times = {"fresh": [], "cached": []}
for rep in range(3):
    for name, how in (("fresh", fresh), ("cached", cached)):
        fs.fake_step.cache_clear(); fs._built_on_meta.cache_clear(); fs._meta_model = how
        t = time.perf_counter()
        e = advisor.estimate("gpt2", batch_size=8, precision="bf16", gpu="a100_40gb", db_url="sqlite:///estimate-bench.sqlite")
        times[name].append(time.perf_counter() - t)
        print(name, round(times[name][-1], 2), e.device_peak_bytes, e.largest_batch, flush=True)
for k, v in times.items(): print(k, "median", round(statistics.median(v), 2), [round(x, 2) for x in v])
