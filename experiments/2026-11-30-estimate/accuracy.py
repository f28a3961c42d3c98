"""`advisor estimate` against what the H200 measured (issue 4), on this CPU-only machine.

    python3 accuracy.py > accuracy.md

The measured side is every ok, uncapped trial recorded in experiments/2026-11-30-h200-measure,
-h200-sweep, -h200-memory and -h200-accuracy-alone (resnet50, vit_b_16, gpt2 x fp32/bf16/fp16 x
checkpointing x three batches, and more); where a spec was measured twice, the newest: for the
54 specs of the accuracy set, a trial run alone on its GPU, and for checkpointed gpt2 one run
after checkpointing stopped keeping transformers' KV cache (-h200-compile-ckpt). Each trial's spec is rebuilt
from its settings through the config (its hash must match the recorded one), estimated without
calibration, then with calibration on the *other* trials of the same model (leave one out).

Two device peaks are compared: the whole trial's (first steps included) and the steady one (the
timed steps' peak reserved plus the context). The second is what decides a fit: -h200-memory's
capped runs show the first step's extra (cuDNN's benchmark workspaces) shrinking to fit a cap.
Last, the largest batch for a budget against the bisected truth of -h200-memory/raw/truth.json.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from pathlib import Path

from advisor.config import load, trial_spec
from advisor.estimate import DEFAULT_CONTEXT_BYTES, estimate, steady_device_peak
from advisor.fake_step import fake_step, replayed_reserved
from advisor.memory_model import Target
from advisor.result import Environment, Status, Throughput, TrialResult, memory_from_dict

HERE = Path(__file__).parent
RAW = [
    *sorted((HERE.parent / "2026-11-30-h200-measure" / "raw").glob("results-gpu-*.jsonl")),
    HERE.parent / "2026-11-30-h200-sweep" / "raw" / "grid.jsonl",
    HERE.parent / "2026-11-30-h200-memory" / "raw" / "trials.jsonl",
    *sorted((HERE.parent / "2026-11-30-h200-accuracy-alone" / "raw").glob("trials-lane*.jsonl")),
    HERE.parent / "2026-11-30-h200-compile-ckpt" / "raw" / "trials-accuracy.jsonl",
]
TRUTH = HERE.parent / "2026-11-30-h200-memory" / "raw" / "truth.json"
TRUTH_FAMILIES = {  # truth.json's tag: the family's settings (batch size aside)
    "truth-r50": ["model=resnet50", "precision=fp32"],
    "truth-gpt2": ["model=gpt2", "precision=bf16"],
    "truth-vit": ["model=vit_b_16", "precision=bf16"],
}
H200 = Target("h200", 150754820096, 0.05)
GiB = 2**30


def unprefixed(memory: dict) -> dict:
    """-h200-memory's run.py wrote the peak phase as str(Phase.forward): 'Phase.forward'."""
    phase = memory.get("peak_phase")
    return {**memory, "peak_phase": phase.removeprefix("Phase.") if phase else None}


def trial_of(path: Path, d: dict) -> TrialResult | None:
    """A recorded result as a TrialResult, its spec rebuilt through the config (the hash must
    match the recorded one); None for what is not an ok, uncapped measurement."""
    if d.get("status") != "ok" or d["spec"]["memory_cap_bytes"] is not None:
        return None
    s = d["spec"]
    if path.name == "results-gpu-a.jsonl" and s["precision"] == "fp16":
        return None  # measured before the fp16 warm-up fix; part b has them again
    spec = trial_spec(
        load(
            [
                "device=cuda",
                f"model={s['model']}",
                f"batch_size={s['batch_size']}",
                f"grad_accum={s['grad_accum']}",
                f"precision={s['precision']}",
                f"checkpointing={s['checkpointing']}",
                f"optimizer={s['optimizer']}",
                f"channels_last={s['channels_last']}",
                f"compile={s['compile']}",
                f"expandable_segments={s['expandable_segments']}",
            ]
        )
    )
    assert spec.hash == s["hash"], (spec.hash, s)
    return TrialResult(
        spec,
        Status.ok,
        Environment(**d["environment"]),
        memory_from_dict(unprefixed(d["memory"])),
        Throughput(**d["throughput"]),
        None,
        d["wall_s"],
    )


def trials() -> list[TrialResult]:
    """Each spec once: its newest run."""
    seen: dict[str, TrialResult] = {}
    for path in RAW:
        for line in path.open():
            trial = trial_of(path, json.loads(line))
            if trial is not None:
                seen[trial.spec.hash] = dataclasses.replace(trial, id=len(seen) + 1)
    return list(seen.values())


def main() -> None:
    measured = trials()
    rows, seconds = [], []
    errors: dict[str, list[float]] = {
        k: []
        for k in ("alloc", "alloc_cal", "device", "device_cal", "steady", "steady_cal", "replay")
    }
    for r in measured:
        m = r.memory
        assert m is not None
        fake_step.cache_clear()  # time a cold estimate: two fake steps (batch b and 2b)
        started = time.perf_counter()
        raw = estimate(r.spec, H200)
        seconds.append((r.spec.model.name, time.perf_counter() - started))
        cal = estimate(r.spec, H200, [o for o in measured if o is not r])
        steady = steady_device_peak(r)
        e = {
            "alloc": raw.peak_allocated_bytes / m.steady_peak_allocated_bytes - 1,
            "alloc_cal": cal.peak_allocated_bytes / m.steady_peak_allocated_bytes - 1,
            "device": raw.device_peak_bytes / m.device_peak_bytes - 1,
            "device_cal": cal.device_peak_bytes / m.device_peak_bytes - 1,
            "steady": raw.device_peak_bytes / steady - 1,
            "steady_cal": cal.device_peak_bytes / steady - 1,
            "replay": (replayed_reserved(fake_step(r.spec)) + DEFAULT_CONTEXT_BYTES) / steady - 1,
        }
        for k, v in e.items():
            errors[k].append(v)
        s = r.spec
        rows.append(
            f"| {s.model.name} {s.precision.value} ckpt={s.checkpointing.value} "
            f"cl={s.channels_last} b{s.batch_size} | {m.steady_peak_allocated_bytes / GiB:.2f} "
            f"| {raw.peak_allocated_bytes / GiB:.2f} ({e['alloc']:+.1%}) "
            f"| {cal.peak_allocated_bytes / GiB:.2f} ({e['alloc_cal']:+.1%}) "
            f"| {steady / GiB:.2f} | {m.device_peak_bytes / GiB:.2f} "
            f"| {raw.device_peak_bytes / GiB:.2f} ({e['steady']:+.1%} / {e['device']:+.1%}) "
            f"| {cal.device_peak_bytes / GiB:.2f} ({e['steady_cal']:+.1%} / {e['device_cal']:+.1%}) |"
        )
    print(f"# Estimate against the H200: {len(measured)} measured trials\n")
    print(
        "| spec | measured steady peak alloc GiB | estimated | calibrated (leave one out) "
        "| measured device peak GiB, steady | whole trial | estimated (error vs steady / whole) "
        "| calibrated |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("\nalloc: steady peak allocated; steady: device peak of the timed steps (reserved plus")
    print(
        "context); device: the whole trial's device peak (first steps included); _cal: calibrated"
    )
    print("\n| error | median abs | worst abs | worst under (most negative) |")
    print("|---|---|---|---|")
    for k, v in errors.items():
        print(
            f"| {k} | {statistics.median(abs(x) for x in v):.1%} | {max(abs(x) for x in v):.1%} "
            f"| {min(v):+.1%} |"
        )
    per_model: dict[str, list[float]] = {}
    for model, t in seconds:
        per_model.setdefault(model, []).append(t)
    print(
        "\nseconds per uncalibrated estimate, cold (two fake steps; the first of all also probes "
        "the optimizer): "
        + ", ".join(
            f"{k} median {statistics.median(v):.1f} s, max {max(v):.1f} s"
            for k, v in per_model.items()
        )
    )
    largest_batches(measured)


def largest_batches(measured: list[TrialResult]) -> None:
    """The estimate's largest batch for a budget (no margin) against the largest that ran under
    a cap of that budget less the context on the H200."""
    print("\n## Largest batch for a budget against the bisected truth\n")
    print("| family | budget | truth | estimated | calibrated |")
    print("|---|---|---|---|---|")
    for tag, truth in json.loads(TRUTH.read_text()).items():
        spec = trial_spec(load(["device=cuda", "batch_size=32", *TRUTH_FAMILIES[tag]]))
        target = Target(tag, truth["budget_bytes"], 0.0)
        history = [r for r in measured if r.spec.model == spec.model]
        raw, cal = estimate(spec, target).largest_batch, estimate(spec, target, history)
        best = truth["largest_ok"]
        print(
            f"| {' '.join(TRUTH_FAMILIES[tag])} | {truth['budget_bytes'] / GiB:.0f} GiB | {best} "
            f"| {raw} ({(raw or 0) / best - 1:+.1%}) "
            f"| {cal.largest_batch} ({(cal.largest_batch or 0) / best - 1:+.1%}) |"
        )


if __name__ == "__main__":
    main()
