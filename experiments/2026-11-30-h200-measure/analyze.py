"""Tables for README.md from raw/results-gpu-{a,b}.jsonl: python3 analyze.py > tables.md"""

from __future__ import annotations

import json
from pathlib import Path

RAW = Path(__file__).parent / "raw"
GiB, MiB = 2**30, 2**20


def rows(part: str) -> list[dict]:
    return [json.loads(line) for line in (RAW / f"results-{part}.jsonl").open()]


def setting(r: dict) -> str:
    s = r["spec"]
    return f"{s['model']} {s['precision']} ckpt={s['checkpointing']} b{s['batch_size']}"


def main() -> None:
    a, b = rows("gpu-a"), rows("gpu-b")
    bare = next(r for r in a if r["tag"] == "bare-context")
    print("## CUDA context\n")
    print(
        f"- bare context (first tensor only), NVML per process: {bare['nvml_process_bytes'] / MiB:.0f} MiB;"
        f" device-wide delta: {bare['device_delta_bytes'] / MiB:.0f} MiB"
    )
    ctx = sorted({r["memory"]["context_bytes"] for r in a + b if r.get("memory")})
    print(
        f"- beyond the allocator at the end of a trial (context + cuBLAS/cuDNN + kernels): "
        f"{ctx[0] / MiB:.0f} to {ctx[-1] / MiB:.0f} MiB\n"
    )

    # part a's fp16 rows were measured before warm-up waited for GradScaler: part b replaces them
    fp16_before_fix = [r for r in a if r.get("spec", {}).get("precision") == "fp16"]
    measured = [r for r in a if r["tag"] == "grid" and r not in fp16_before_fix]
    measured += [r for r in b if r["tag"] == "grid"]
    print("## The grid (AdamW, H200, each trial its own process)\n")
    print(
        "| setting | params | activations | grads | optim state | peak alloc (1st step incl.) "
        "| steady peak alloc | peak reserved | device peak | samples/s | tokens/s | spread | MFU |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in measured:
        m, t = r["memory"], r["throughput"]
        print(
            f"| {setting(r)} | {m['params_bytes'] / MiB:.1f} MiB | {m['activations_bytes'] / GiB:.2f} GiB "
            f"| {m['grads_bytes'] / MiB:.1f} MiB | {m['optimizer_state_bytes'] / MiB:.1f} MiB "
            f"| {m['peak_allocated_bytes'] / GiB:.2f} GiB | {m['steady_peak_allocated_bytes'] / GiB:.2f} GiB "
            f"| {m['peak_reserved_bytes'] / GiB:.2f} GiB | {m['device_peak_bytes'] / GiB:.2f} GiB "
            f"| {t['samples_per_s']:.0f} | {t['tokens_per_s'] or 0:,.0f} | {t['step_s_iqr'] / t['step_s_median']:.1%} "
            f"| {t['mfu']:.1%} |"
        )

    print("\n## The same spec twice\n")
    print(
        "| spec | first | second | peak reserved, first / second | samples/s, first / second | Δ throughput |"
    )
    print("|---|---|---|---|---|---|")
    pairs = [
        ("alone", a, "after-others", b),
        ("grid", b, "repeat", b),
    ]
    for tag1, src1, tag2, src2 in pairs:
        for second in (r for r in src2 if r["tag"] == tag2):
            first = next(
                r for r in src1 if r["tag"] == tag1 and r["spec"]["hash"] == second["spec"]["hash"]
            )
            m1, m2 = first["memory"], second["memory"]
            t1, t2 = first["throughput"]["samples_per_s"], second["throughput"]["samples_per_s"]
            print(
                f"| {setting(first)} | {tag1} | {tag2} | {m1['peak_reserved_bytes']:,} / {m2['peak_reserved_bytes']:,} "
                f"| {t1:.1f} / {t2:.1f} | {(t2 - t1) / t1:+.2%} |"
            )
    for r in fp16_before_fix:
        rerun = next(x for x in b if x["spec"]["hash"] == r["spec"]["hash"])
        t1, t2 = r["throughput"]["samples_per_s"], rerun["throughput"]["samples_per_s"]
        print(
            f"| {setting(r)} | part a (before the fp16 warm-up fix) | part b "
            f"| {r['memory']['peak_reserved_bytes']:,} / {rerun['memory']['peak_reserved_bytes']:,} "
            f"| {t1:.1f} / {t2:.1f} | {(t2 - t1) / t1:+.2%} |"
        )

    oom = next(r for r in b if r["tag"] == "oversized")
    print("\n## An oversized batch\n")
    print(
        f"- {setting(oom)}: status `{oom['status']}` in `{oom['failure']['phase']}`, "
        f"request {oom['failure']['requested_bytes']:,} bytes ({oom['failure']['requested_bytes'] / GiB:.2f} GiB); "
        f"the next trial in the same run: `{b[b.index(oom) + 1]['status']}`"
    )


if __name__ == "__main__":
    main()
