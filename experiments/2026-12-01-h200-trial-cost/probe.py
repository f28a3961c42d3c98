"""Where a resnet50 trial's seconds go, in plain torch (no advisor code): build, the first step
(cuDNN's benchmark), the next steps, and timed steps, each case in a fresh process.

    python3 probe.py CASE            # one case, prints one JSON line
    python3 probe.py all OUT.jsonl   # every case, each in its own process (timeout each)

Cases (issue 13): the 320 s trial (strict fp32, b1024, fused AdamW, channels_last) with
cuDNN's benchmark on and off, the same with torch's default precision (cuDNN TF32 on), and the
spec that measured 5,062/s and 2,255/s (bf16, b1024, fused AdamW, channels_last, expandable
segments) three times over.
"""

import json
import os
import subprocess
import sys
import time

CASES = {
    "fp32_strict_bench": dict(precision="fp32", benchmark=True),
    "fp32_strict_nobench": dict(precision="fp32", benchmark=False),
    "default_bench": dict(precision="default", benchmark=True),
    "bf16_es_1": dict(precision="bf16", benchmark=True, es=True),
    "bf16_es_2": dict(precision="bf16", benchmark=True, es=True),
    "bf16_es_3": dict(precision="bf16", benchmark=True, es=True),
    "bf16_1": dict(precision="bf16", benchmark=True, es=False),
}


def one(name: str) -> dict:
    case = CASES[name]
    import torch
    import torchvision

    t0 = time.perf_counter()
    torch.backends.cudnn.benchmark = case["benchmark"]
    if case["precision"] == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    torch.cuda.init()
    t_init = time.perf_counter()
    with dev:
        model = torchvision.models.resnet50(num_classes=1000).train()
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), fused=True)
    b = 1024
    x = torch.randn(b, 3, 224, 224, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(1000, (b,), device=dev)
    t_build = time.perf_counter()
    auto = case["precision"] == "bf16"

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=auto):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    times = []
    for _ in range(4):  # the first three: warm-up, as advisor does
        s = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - s)
    timed = []
    for _ in range(30):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        step()
        e1.record()
        e1.synchronize()
        timed.append(e0.elapsed_time(e1) / 1000)
    timed_sorted = sorted(timed)
    med = timed_sorted[len(timed) // 2]
    return {
        "case": name,
        **case,
        "batch": b,
        "init_s": t_init - t0,
        "build_s": t_build - t_init,
        "first_step_s": times[0],
        "steps_2_4_s": times[1:],
        "timed_median_s": med,
        "timed_min_s": timed_sorted[0],
        "timed_max_s": timed_sorted[-1],
        "samples_per_s": b / med,
        "timed": timed,
        "peak_reserved": torch.cuda.max_memory_reserved(),
        "total_s": time.perf_counter() - t0,
    }


def clocks() -> str:
    q = "clocks.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu,memory.used"
    r = subprocess.run(
        ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True, text=True
    )
    return r.stdout.strip()


if __name__ == "__main__":
    if sys.argv[1] != "all":
        print(json.dumps(one(sys.argv[1])))
        sys.exit()
    with open(sys.argv[2], "w") as out:
        for name, case in CASES.items():
            env = dict(os.environ)
            env["PYTORCH_CUDA_ALLOC_CONF"] = f"expandable_segments:{case.get('es', False)}"
            before = clocks()
            s = time.perf_counter()
            try:
                r = subprocess.run(
                    [sys.executable, __file__, name],
                    capture_output=True,
                    text=True,
                    timeout=240,
                    env=env,
                )
                line = (
                    r.stdout.strip().splitlines()[-1]
                    if r.returncode == 0
                    else json.dumps({"case": name, "rc": r.returncode, "stderr": r.stderr[-2000:]})
                )
            except subprocess.TimeoutExpired:
                line = json.dumps({"case": name, "timeout_s": 240})
            rec = json.loads(line)
            rec["wall_s"] = time.perf_counter() - s
            rec["nvidia_smi_before"], rec["nvidia_smi_after"] = before, clocks()
            out.write(json.dumps(rec) + "\n")
            out.flush()
            print(
                name,
                {k: rec.get(k) for k in ("wall_s", "first_step_s", "samples_per_s")},
                flush=True,
            )
