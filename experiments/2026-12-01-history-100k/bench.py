"""Issue 15's speed target: history, recommend and the API within 100 ms p95 with 100k stored
trials. Fills a real SQLite database through advisor's public commands, then times requests.

    python experiments/2026-12-01-history-100k/bench.py OUT [--trials 100000] [--repeats 100]

1. One real trial (`advisor run model=tiny_mlp device=cpu`), exported (`advisor export`).
2. An export of N trials made from it: 40 workloads (the first is tiny_mlp itself, the others
   renamed), batches 1-1024, four precisions, four GPUs, two torch versions, one trial a
   minute over N minutes; 85% ok, 10% oom, 5% crashed, with sizes and rates that vary.
3. `advisor import` of that export, timed.
4. `advisor serve` on it; each request below `--repeats` times over loopback, timed at the
   client: the first (cold: the server has read nothing yet), then p50, p95, max. And
   `advisor history` as a whole command (with Python's start).
5. `advisor.recommend(...)` and `advisor.history(...)` in this process (the Python API), timed
   the same way.
Writes OUT/results.json and prints a table.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import random
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import advisor

GPUS = [("NVIDIA H200", 150_120_988_160), ("NVIDIA A100-SXM4-80GB", 85_899_345_920),
        ("NVIDIA L4", 24_152_899_584), ("NVIDIA GeForce RTX 4090", 25_757_220_864)]  # fmt: skip
TORCH = ["2.11.0+cu130", "2.10.0+cu128"]
PRECISIONS = ["default", "tf32", "bf16", "fp16"]
MODELS = 40


def advisor_cli(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "advisor", *args, f"db_url={db}"],
                          capture_output=True, text=True, timeout=3600)  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"advisor {' '.join(args)} failed: {done.stderr}")
    return done


def many(seed: dict, n: int) -> dict:
    rng = random.Random(0)
    start = datetime.datetime(2026, 9, 1, tzinfo=datetime.UTC)
    trials = []
    for i in range(n):
        record = copy.deepcopy(seed)
        spec = json.loads(record["spec"])
        if i % MODELS:
            spec["model"]["name"] = f"model_{i % MODELS:02d}"
        spec["device"] = "cuda"
        spec["batch_size"] = 2 ** rng.randrange(11)
        spec["precision"] = rng.choice(PRECISIONS)
        spec["channels_last"] = False
        spec["compile"] = rng.random() < 0.3
        record["spec"] = json.dumps(spec, sort_keys=True, separators=(",", ":"))
        name, memory = rng.choice(GPUS)
        record["environment"] |= {"device_name": name, "device_memory_bytes": memory,
                                  "torch": rng.choice(TORCH), "driver": "580.0", "cuda": "13.0"}  # fmt: skip
        record["created_at"] = (start + datetime.timedelta(minutes=i)).isoformat()
        roll = rng.random()
        if roll < 0.85:
            peak = int(2**30 * (1 + spec["batch_size"] * rng.uniform(0.02, 0.2)))
            record["memory"] = {k: (int(v * peak / seed["memory"]["device_peak_bytes"])
                                    if isinstance(v, int) and k.endswith("_bytes") else v)
                                for k, v in seed["memory"].items()}  # fmt: skip
            rate = spec["batch_size"] * rng.uniform(5, 50)
            record["throughput"] = {**seed["throughput"], "samples_per_s": rate,
                                    "step_s_median": spec["batch_size"] / rate}  # fmt: skip
            record["status"], record["failure"] = "ok", None
        else:
            status = "oom" if roll < 0.95 else "crashed"
            record["memory"] = record["throughput"] = None
            record["status"] = status
            record["failure"] = {"phase": "forward" if status == "oom" else None,
                                 "requested_bytes": 2**30 if status == "oom" else None,
                                 "message": "CUDA out of memory" if status == "oom" else "exit 1"}  # fmt: skip
        trials.append(record)
    return {**{k: v for k, v in seed.items() if k != "trials"}, "trials": trials}


def timed(call, repeats: int) -> dict[str, float]:
    started = time.perf_counter()
    call()  # the first, which fills the server's caches, is given apart
    first = time.perf_counter() - started
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    times.sort()
    return {"first_ms": first * 1e3, "p50_ms": statistics.median(times) * 1e3,
            "p95_ms": times[max(0, int(len(times) * 0.95) - 1)] * 1e3,
            "max_ms": times[-1] * 1e3, "n": len(times)}  # fmt: skip


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as answer:
        if answer.status != 200:
            raise RuntimeError(f"{url}: {answer.status}")
        return answer.read()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=100)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    seed_db, db = f"sqlite:///{args.out}/seed.sqlite", f"sqlite:///{args.out}/bench.sqlite"
    for name in ("seed.sqlite", "bench.sqlite"):
        for suffix in ("", "-wal", "-shm"):
            (args.out / f"{name}{suffix}").unlink(missing_ok=True)
    fast = ["measure.min_timed_steps=3", "measure.max_timed_steps=5", "measure.max_timed_s=2"]
    advisor_cli("run", "model=tiny_mlp", "device=cpu", *fast, db=seed_db)
    advisor_cli("export", f"out={args.out}/seed.json", db=seed_db)
    seed = json.loads((args.out / "seed.json").read_text())
    export = many(seed["trials"][0] | {}, args.trials) | {"format": seed["format"],
                                                          "version": seed["version"]}  # fmt: skip
    (args.out / "big.json").write_text(json.dumps(export))
    started = time.perf_counter()
    said = advisor_cli("import", str(args.out / "big.json"), db=db).stderr.strip()
    results: dict[str, object] = {"trials": args.trials, "import_s": time.perf_counter() - started,
                                  "import_said": said}  # fmt: skip
    print(f"import: {results['import_s']:.1f} s ({said})", flush=True)

    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "advisor", "serve", "--port", str(port),
                               f"db_url={db}"], stderr=subprocess.DEVNULL)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            get(f"{base}/api/v1/sweeps")
            break
        except OSError:
            time.sleep(0.3)
    rng = random.Random(1)
    requests = {
        "API trials (newest 100)": "/api/v1/trials",
        "API trials model+status, 20": "/api/v1/trials?model=model_07&status=ok&limit=20",
        "API trials gpu+torch+since, 20": "/api/v1/trials?gpu=h200&torch=2.11&since=2026-10-01&limit=20",
        "API trials workload (all match), 20": "/api/v1/trials?workload=catalog.classifier&limit=20",
        "API trials workload (none match), 20": "/api/v1/trials?workload=own_model.py:workload&limit=20",
        "API trials oom of a model, all": "/api/v1/trials?model=model_07&status=oom&limit=10000",
        "API one trial": lambda: f"/api/v1/trials/{rng.randrange(1, args.trials)}",
        "API recommend (a model, a100_80gb)": "/api/v1/recommend?model=model_07&gpu=a100_80gb",
        "API recommend (24GiB, batch 256)": "/api/v1/recommend?model=model_13&memory=24GiB&effective_batch_size=256",
        "page: trials": "/",
        "page: one trial": lambda: f"/trials/{rng.randrange(1, args.trials)}",
        "page: recommend": "/recommend?model=model_07&gpu=a100_80gb",
    }
    timings = {}
    try:
        for label, path in requests.items():
            timings[label] = timed(lambda p=path: get(base + (p() if callable(p) else p)),
                                   args.repeats)  # fmt: skip
            print(f"{label:40} {timings[label]}", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    timings["CLI advisor history (whole command)"] = timed(
        lambda: advisor_cli("history", "model=model_07", "limit=20", db=db), 5
    )
    timings["Python advisor.recommend (tiny_mlp, 80GiB)"] = timed(
        lambda: advisor.recommend("tiny_mlp", gpu={"memory": "80GiB"}, db_url=db),
        args.repeats)  # fmt: skip
    timings["Python advisor.history (model, 20)"] = timed(
        lambda: advisor.history(model="model_07", limit=20, db_url=db), args.repeats
    )
    timings["Python advisor.history (gpu+torch+since, 20)"] = timed(
        lambda: advisor.history(gpu="h200", torch="2.11", since="2026-10-01", limit=20, db_url=db),
        args.repeats,
    )
    for label in list(timings)[-4:]:
        print(f"{label:40} {timings[label]}", flush=True)
    results["timings"] = timings
    (args.out / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
