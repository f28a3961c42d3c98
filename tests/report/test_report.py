"""The sweep's report: what it holds memory against, and what it explains."""

from __future__ import annotations

import dataclasses

from fake_backend import SPACE, GiB, fake_result
from rich.console import Console

from advisor.config import load, trial_spec
from advisor.recommendation import against, recommend
from advisor.report import sweep_report
from advisor.result import TimingStop
from advisor.target import Target


def test_the_report_shares_the_targets_memory_and_explains_only_a_cut_it_shows():
    """A recommendation holds memory against the target (a CPU sweep's too), not 'GPU'; the
    '≤' legend is printed under a table only when one of its rates is a cut's bound."""

    def text(results):
        console = Console(width=200, record=True)
        console.print(sweep_report.recommendation_report(recommend(results, target), None))
        return console.export_text()

    fast, slow, dominated = (
        fake_result(trial_spec(load([*SPACE, *overrides])))
        for overrides in (
            ["batch_size=64", "precision=fp16"],
            ["batch_size=32", "precision=fp16"],
            ["batch_size=64", "precision=fp32"],  # slower than the first and larger
        )
    )
    target = Target("small", 12 * GiB, 0.05)
    shown = text([fast, slow, dominated])
    assert "of target" in shown and "█ categories (stacked), | device peak: " in shown
    assert " of 12.00 GiB target memory" in shown
    assert "GPU" not in shown and "≤" not in shown
    assert dominated.throughput is not None
    cut = dataclasses.replace(
        dominated, throughput=dataclasses.replace(dominated.throughput, stopped=TimingStop.cut)
    )
    shown = text([fast, slow, cut])
    assert shown.count("≤: timing cut short") == 1  # under the runners-up, not the Pareto front
    legend, front = shown.index("≤: timing cut short"), shown.index("Pareto front")
    assert shown.index("runners-up") < shown.index("≤") < legend < front


def test_a_speedup_within_the_rates_intervals_is_said_to_be_not_shown():
    """1.03x from two rates each known to ±2% is no speedup that was shown; 1.5x is."""

    def known_to(result, precision, rate):
        step_s = result.spec.effective_batch_size / rate
        throughput = dataclasses.replace(
            result.throughput,
            samples_per_s=rate,
            step_s_median=step_s,
            step_s_ci95=None if precision is None else precision * step_s,
        )
        return dataclasses.replace(result, throughput=throughput)

    baseline, best = (
        fake_result(trial_spec(load([*SPACE, f"batch_size={b}", "precision=fp16"])))
        for b in (32, 64)
    )
    target = Target("small", 12 * GiB, 0.05)
    # (a rate whose interval is not stored, as an older trial's, leaves it unsaid)
    for best_rate, precision, said in (
        (103.0, 0.02, True),
        (150.0, 0.02, False),
        (103.0, None, False),
    ):
        pair = [known_to(baseline, 0.02, 100.0), known_to(best, precision, best_rate)]
        rec = recommend(pair, target)
        assert rec.best is not None and rec.best.samples_per_s == best_rate
        line = sweep_report.baseline_line(pair[0], against(pair[0], rec.best), rec).plain
        assert line.startswith(f"{best_rate / 100:.2f}x faster")
        assert ("; the difference is within the two rates' 95% intervals" in line) is said
    # the same memory is said as such, not as a comparison ("the same memory than ...")
    same = [known_to(baseline, 0.02, 100.0), known_to(best, 0.02, 150.0)]
    same[1] = dataclasses.replace(same[1], memory=same[0].memory)
    rec = recommend(same, target)
    line = sweep_report.baseline_line(same[0], against(same[0], same[1]), rec).plain
    assert line.startswith("1.50x faster, in the same memory, than your current settings")


def test_the_target_line_names_a_budget_once_and_says_what_transfers_from_elsewhere():
    """gpu.memory=12GiB is named by its size (once); a named GPU that was not the one measured
    gets what transfers and what does not; a budget swept on this GPU ran under its cap, and
    on the CPU the rates are the CPU's."""

    def text(target, device):
        result = fake_result(
            trial_spec(load([*SPACE, "batch_size=64", "precision=fp16", f"device={device}"]))
        )
        console = Console(width=200, record=True)
        console.print(sweep_report.recommendation_report(recommend([result], target), None))
        return console.export_text()

    budget = text(Target.budget(12 * GiB, 0.05), "cuda")
    assert "target: 12.00 GiB, keeping 5% free" in budget and "12GiB" not in budget
    assert "throughput was measured" not in budget
    named = text(Target("t4", 12 * GiB, 0.05), "cuda")
    assert "target: t4, 12.00 GiB, keeping 5% free" in named
    assert "not on t4: the memory that fits transfers (with the same torch version), the " in named
    cpu = text(Target.budget(12 * GiB, 0.05), "cpu")
    # (a CPU's name has a colon of its own, "CPU: AMD EPYC": the phrase after it is not a second)
    assert "; the memory that fits transfers to a GPU (with the same torch version), the " in cpu


def test_a_sweeps_step_line_breaks_between_phrases_at_80_columns():
    """A newcomer's 80-column terminal broke the step lines mid-phrase ("peak / 68.6 MiB (too
    big)", "batch 128, bf16, / adamw_fused"); a log keeps each step on one line."""
    from advisor.search.steps import Settled, Step, SweepProgress

    knobs = ["model=tiny_cnn", "device=cpu", "batch_size=128", "precision=bf16",
             "optimizer=adamw_fused", "channels_last=true", "compile=true"]  # fmt: skip
    result = fake_result(trial_spec(load(knobs)))
    line = sweep_report.sweep_step_line(
        SweepProgress(best=result), Step(result.spec, Settled.measured, result, False), 6
    )
    console = Console(width=80, record=True)
    console.print(line)
    printed = console.export_text().splitlines()
    assert all(len(row) <= 80 for row in printed) and len(printed) > 1
    phrases = [p.plain.strip().rstrip(",") for p in line.phrases]
    assert all(any(phrase in row for row in printed) for phrase in phrases)  # each whole
    assert any("(too big)" in p for p in phrases)
    assert "\n" not in line.joined().plain and line.joined().plain == line.plain


def test_a_share_near_the_flagging_line_keeps_its_tenth():
    """A trial is flagged where others used more than 10% of the CPUs; rounded, 10.4% read as
    "10%", at the line, not over it."""
    shares = [sweep_report.share(x) for x in (0.104, 0.096, 0.5, 0.0)]
    assert shares == ["10.4%", "9.6%", "50%", "0%"]
