"""Replay the sweep over a recorded H200 grid (BENCH_DIR/raw/grid.jsonl, over the space in
BENCH_DIR/bench.py): the real Sweeper, TPE and memory rules, answered from the measured results
instead of the GPU. Many sampler seeds give the spread that one live sweep cannot.

    python3 replay.py [SEEDS] [TRIALS] [PATIENCE] [BENCH_DIR] [estimate]

BENCH_DIR defaults to this directory. With `estimate`, the sweep has the fake-tensor estimate as
`advisor sweep` has it (calibrated on what the replayed sweep measured; no other history).
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
import tempfile
from pathlib import Path

from advisor import search
from advisor.config import load, trial_spec
from advisor.estimate import Estimator
from advisor.result import Environment, Status, Throughput, TrialResult, memory_from_dict
from advisor.space import space_of
from advisor.spec import TrialSpec
from advisor.study import open_study
from advisor.target import target_of


def space_of_bench(bench_dir: Path) -> list[str]:
    """The SPACE overrides of BENCH_DIR/bench.py: the space its grid and sweep covered."""
    spec = importlib.util.spec_from_file_location("bench", bench_dir / "bench.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return list(bench.SPACE)


def key(s: TrialSpec | dict) -> str:
    return s["hash"] if isinstance(s, dict) else s.hash


class Replay:
    def __init__(self, table: dict[tuple, dict]) -> None:
        self.table = table
        self.calls: list[TrialSpec] = []

    def measure(self, spec: TrialSpec) -> TrialResult:
        self.calls.append(spec)
        d = self.table[key(spec)]
        return TrialResult(
            spec,
            Status(d["status"]),
            Environment(**d["environment"]),
            memory_from_dict(d["memory"]),
            Throughput(**d["throughput"]),
            None,
            d["wall_s"],
            id=len(self.calls),
        )

    def measured_before(self, spec: TrialSpec) -> TrialResult | None:
        return None


def main() -> None:
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    trials = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    patience = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    bench_dir = Path(sys.argv[4]) if len(sys.argv) > 4 else Path(__file__).parent
    with_estimate = len(sys.argv) > 5 and sys.argv[5] == "estimate"
    overrides = space_of_bench(bench_dir)
    table = {
        key(json.loads(line)["spec"]): json.loads(line)
        for line in (bench_dir / "raw" / "grid.jsonl").open()
    }
    cfg = load(overrides)
    base = trial_spec(cfg)
    space = space_of(cfg, overrides, base)
    target = target_of(cfg, base.device)
    fits = [d for d in table.values() if d["memory"]["device_peak_bytes"] <= target.allowed_bytes]
    grid_best = max(d["throughput"]["samples_per_s"] for d in fits)
    grid_seconds = sum(d["wall_s"] for d in table.values())
    ratios, counts, seconds = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(seeds):
            study = open_study(f"sqlite:///{tmp}/s{seed}.sqlite", "replay", seed=seed)
            replay = Replay(table)
            estimator = Estimator([]) if with_estimate else None
            sweeper = search.Sweeper(space, target, replay, study, estimate=estimator)
            sweeper.run(trials, None, patience)
            best = sweeper.progress.best
            ratios.append(best.throughput.samples_per_s / grid_best if best else 0.0)
            counts.append(len(replay.calls))
            seconds.append(sum(table[key(s)]["wall_s"] for s in replay.calls))
    print(
        f"grid: {len(table)} specs, {len(fits)} fit {target.allowed_bytes / 2**30:.1f} GiB, "
        f"best {grid_best:.0f}/s, {grid_seconds:.0f} GPU-s"
    )
    print(
        f"replay, {seeds} seeds, trials={trials} patience={patience}"
        + (", with the estimate:" if with_estimate else ":")
    )
    print(
        f"  recommended / grid best: median {statistics.median(ratios):.3f}, "
        f"min {min(ratios):.3f}, share of seeds >= 0.97: {sum(r >= 0.97 for r in ratios) / seeds:.2f}"
    )
    print(
        f"  trials: median {statistics.median(counts)} of {len(table)}; GPU-seconds: median "
        f"{statistics.median(seconds) / grid_seconds:.2f} of the grid's (max {max(seconds) / grid_seconds:.2f})"
    )


if __name__ == "__main__":
    main()
