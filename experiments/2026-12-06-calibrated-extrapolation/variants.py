"""How calibration's reserve rules do on the catalog's accuracy set, leave one out, each rule
on the same fake steps (internal API on purpose: the question is calibration's own rule, and
the fake steps, the slow part, are made once for all the rules).

    python variants.py resnet50 vit_b_16 > raw/variants.md

The measurements and their specs are ../2026-12-05-calibrated-recheck's (recheck.py's
`measured`); the public-API figure for the rule chosen is that script's, rerun."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import advisor
from advisor.estimation import corrections as corr
from advisor.result import Status, TrialResult, memory_from_dict

HERE = Path(__file__).resolve().parent
spec_of = importlib.util.spec_from_file_location(
    "recheck", HERE.parent / "2026-12-05-calibrated-recheck" / "recheck.py"
)
recheck = importlib.util.module_from_spec(spec_of)  # type: ignore[arg-type]
spec_of.loader.exec_module(recheck)  # type: ignore[union-attr]


def trial(row: dict, spec: advisor.TrialSpec) -> TrialResult:
    memory = dict(row["memory"])
    if memory.get("peak_phase"):
        memory["peak_phase"] = memory["peak_phase"].removeprefix("Phase.")
    return TrialResult(spec, Status.ok, None, memory_from_dict(memory), None, None, 0.0)


def device_peak(spec: advisor.TrialSpec, history: list[TrialResult]) -> int:
    c = corr.Corrections.of(spec, history)
    return c.steady_reserved(spec, corr.fake_step(spec)) + c.context


def _batches(spec: advisor.TrialSpec, history: list[TrialResult]) -> list[int]:
    """The batches of the alike trials whose reserve calibrates the spec's: calibrate's
    selection, less the filters no trial here meets (another job, a CPU trial, a cap, an
    optimizer it does not know); all 52 are uncapped one-GPU CUDA trials of bundled optimizers."""
    measured = [r for r in history if r.spec.model.identity == spec.model.identity]
    alike = corr._most_alike(spec, measured)[:30]
    return [
        r.spec.batch_size
        for r in alike
        if not r.spec.expandable_segments and corr._recomputes_alike(r.spec, spec)
    ]


@contextlib.contextmanager
def today() -> Iterator[None]:
    yield


def _patched(change: Callable[[corr.Calibration, advisor.TrialSpec, list[int]], corr.Calibration]):
    @contextlib.contextmanager
    def rule() -> Iterator[None]:
        original = corr.calibrate

        def calibrate(spec, history):  # type: ignore[no-untyped-def]
            c = original(spec, history)
            if c is None or c.reserve_offset is None:
                return c
            return change(c, spec, _batches(spec, list(history)))

        corr.calibrate = calibrate
        try:
            yield
        finally:
            corr.calibrate = original

    return rule


def _outside(spec: advisor.TrialSpec, batches: list[int]) -> bool:
    return not min(batches) <= spec.batch_size <= max(batches)


def clamped(c, spec, batches):  # type: ignore[no-untyped-def]
    """Outside the alike batches, the line's offset at the nearest one."""
    if not _outside(spec, batches):
        return c
    fixed, per_sample = c.reserve_offset
    edge = min(max(spec.batch_size, min(batches)), max(batches))
    return dataclasses.replace(c, reserve_offset=(fixed + per_sample * edge, 0.0))


def ratio_outside(c, spec, batches):  # type: ignore[no-untyped-def]
    """Outside the alike batches, no line: the replay ratio (or the factor)."""
    return dataclasses.replace(c, reserve_offset=None) if _outside(spec, batches) else c


def ratio_always(c, spec, batches):  # type: ignore[no-untyped-def]
    """Never a line: the replay ratio (or the factor)."""
    return dataclasses.replace(c, reserve_offset=None)


RULES: dict[str, Callable] = {
    "today": today,
    "clamped outside": _patched(clamped),
    "ratio outside": _patched(ratio_outside),
    "ratio always": _patched(ratio_always),
}


def main() -> None:
    models = sys.argv[1:]
    rows = [r for r in recheck.measured() if r["spec"]["model"] in models]
    with tempfile.TemporaryDirectory() as temp:
        empty = f"sqlite:///{temp}/empty.db"
        specs = [
            advisor.estimate(**recheck.settings(r), device="cuda", gpu="h200", db_url=empty).spec
            for r in rows
        ]
    trials = [trial(r, s) for r, s in zip(rows, specs, strict=True)]
    errors: dict[str, list[float]] = {name: [] for name in RULES}
    print("| spec | truth GiB | " + " | ".join(RULES) + " |")
    print("|---|---|" + "---|" * len(RULES))
    for i, (row, t) in enumerate(zip(rows, trials, strict=True)):
        others = [o for j, o in enumerate(trials) if j != i and o.spec.model == t.spec.model]
        m = row["memory"]
        truth = m["steady_peak_reserved_bytes"] + m["context_bytes"]
        cells = []
        for name, rule in RULES.items():
            with rule():
                e = device_peak(t.spec, others) / truth - 1
            errors[name].append(e)
            cells.append(f"{e:+.1%}")
        s = row["spec"]
        print(f"| {s['model']} {s['precision']} ckpt={s['checkpointing']} "
              f"cl={s['channels_last']} b{s['batch_size']} | {truth / 2**30:.2f} | "
              + " | ".join(cells) + " |", flush=True)  # fmt: skip
    print(
        f"\n{len(rows)} specs; steady device peak, median abs / worst abs / worst under, "
        "within [-2%, +5%]:"
    )
    for name, es in errors.items():
        inside = sum(-0.02 <= e <= 0.05 for e in es)
        print(f"- {name}: {recheck.summary(es)}, {inside} within")


if __name__ == "__main__":
    main()
