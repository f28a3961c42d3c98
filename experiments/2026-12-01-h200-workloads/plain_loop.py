"""A plain training loop, as its community writes it, timed by advisor's protocol: the first
step (compilation, cuDNN's autotuning) untimed, then two more warm-up steps, then steps timed
in chunks of five by CUDA events until the interquartile range is within 2% of the median
(at least 10 steps, at most 200 or 30 s). The steady peak is taken from the second step on.

    python plain_loop.py gpt2|resnet50   (prints one JSON line)
"""

import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_positions=1024, use_cache=False)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, fused=True)
    model = torch.compile(model)
    tokens = torch.randint(50257, (32, 1024), device="cuda")

    def loss():
        return model(input_ids=tokens, labels=tokens).loss

    return model, optimizer, loss, 32


def resnet50():
    import torchvision

    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
    model = torch.compile(model)
    images = torch.randn(256, 3, 224, 224, device="cuda").contiguous(
        memory_format=torch.channels_last
    )
    labels = torch.randint(1000, (256,), device="cuda")

    def loss():
        return F.cross_entropy(model(images), labels)

    return model, optimizer, loss, 256


def main():
    model, optimizer, loss_of, batch = {"gpt2": gpt2, "resnet50": resnet50}[sys.argv[1]]()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_of()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    started = time.perf_counter()
    step()
    torch.cuda.synchronize()
    first_s = time.perf_counter() - started
    torch.cuda.reset_peak_memory_stats()
    step()
    step()
    times = []
    began = time.perf_counter()
    while True:
        events = []
        for _ in range(5):
            b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            b.record()
            step()
            e.record()
            events.append((b, e))
        torch.cuda.synchronize()
        times += [b.elapsed_time(e) / 1000 for b, e in events]
        q1, _, q3 = statistics.quantiles(times, n=4)
        median = statistics.median(times)
        if len(times) >= 200 or time.perf_counter() - began >= 30:
            break
        if len(times) >= 10 and (q3 - q1) / median <= 0.02:
            break
    print(
        json.dumps(
            {
                "loop": "plain",
                "model": sys.argv[1],
                "samples_per_s": batch / median,
                "step_s_median": median,
                "step_s_iqr": q3 - q1,
                "timed_steps": len(times),
                "first_step_s": first_s,
                "steady_peak_allocated_bytes": torch.cuda.max_memory_allocated(),
                "steady_peak_reserved_bytes": torch.cuda.max_memory_reserved(),
            }
        )
    )


if __name__ == "__main__":
    main()
