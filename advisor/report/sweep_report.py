"""A sweep in the terminal: a line per spec it settled, the recommendation with its runners-up
and front, the answer's repeats, the baseline it is held against, the time to the answer, and
the largest batch each setting is predicted to fit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

from advisor import gpus
from advisor.recommendation import DISAGREE, Against, Recommendation
from advisor.report.terminal import (
    CUT_LEGEND,
    Phrases,
    describe_spec,
    gib,
    job_lines,
    knobs_of,
    memory_bar,
    memory_table,
    rate,
    rate_precision,
)
from advisor.result import Status, TrialResult
from advisor.search.steps import Step, SweepProgress
from advisor.spec import Device, TrialSpec
from advisor.target import Target
from advisor.trial.machine_load import LOAD_NOISE

if TYPE_CHECKING:  # (history's verbs read this module: the search would import torch, Optuna)
    from advisor.search.answer import LoadCheck
    from advisor.search.study import Resumed


def sweep_step_line(progress: SweepProgress, step: Step, trials: int) -> Phrases:
    """One line per spec the sweep settled: k of n measured, the spec, its fate, the best; a
    narrow terminal breaks it between these phrases, never inside one."""
    fate: list[str] = []
    if step.result is not None and step.result.status is Status.ok and step.result.memory:
        t, m = step.result.throughput, step.result.memory
        rate = f"{t.samples_per_s:,.1f}/s{rate_precision(t)}" if t else "-"
        if t is not None and t.cut:
            rate = f"{t.samples_per_s:,.1f}/s (cut: cannot beat the best)"
        if step.result.job is not None and t is not None:  # a rank's, as its job (modelled:
            rate = f"job {t.samples_per_s:,.1f}/s (modelled)"  # no measured precision holds)
        fate = [
            f"{rate}, ",
            f"peak {gib(m.device_peak_bytes)} ({'fits' if step.feasible else 'too big'})",
        ]
        if t is not None and t.machine_load is not None and t.machine_load > LOAD_NOISE:
            fate[-1] += ", "
            fate.append(f"others used {share(t.machine_load)} of the CPUs")
    elif step.result is not None:
        fate = [step.result.status.value]
    else:
        fate = [f"skipped: {step.reason}"]
    best = (
        progress.best.throughput.samples_per_s if progress.best and progress.best.throughput else 0
    )
    style = "green" if step.feasible else "yellow" if step.result is None else "red"
    return Phrases(
        Text(f"[{progress.measured}/{trials} measured, {progress.elapsed_s:4.0f}s] ", "grey50"),
        f"{step.settled:13} ",
        f"{describe_spec(step.spec):55} ",
        *[Text(phrase, style) for phrase in fate],
        *([Text(f"  best {best:,.1f}/s", "bold")] if best else []),
    )


def measured_again_line(result: TrialResult, why: str) -> Phrases:
    """One line per measurement the answer made after the search, and why."""
    t, m = result.throughput, result.memory
    fate = [result.status.value]
    if result.status is Status.ok and t is not None and m is not None:
        rate = f"{t.samples_per_s:,.1f}/s"
        fate = [
            f"job {rate} (modelled), " if result.job else f"{rate}{rate_precision(t)}, ",
            f"peak {gib(m.device_peak_bytes)}",
        ]
        if t.machine_load is not None and t.machine_load > LOAD_NOISE:
            fate[-1] += ", "
            fate.append(f"others used {share(t.machine_load)} of the CPUs")
    return Phrases(
        Text(f"measured again ({why}) ", "grey50"), f"{describe_spec(result.spec)}: ", *fate
    )


def recommendation_report(rec: Recommendation, confirmation: TrialResult | None) -> Group:
    target = rec.target
    named = "" if target.is_budget else f"{target.name}, "
    lines: list[Text | Table | Phrases | Group] = [
        Phrases(
            f"target: {named}{gib(target.memory_bytes)}, ", f"keeping {target.margin:.0%} free ",
            f"(fits under {gib(target.allowed_bytes)}); ", f"{rec.considered} measured settings",
            style="bold",
        )
    ]  # fmt: skip
    best = rec.best
    if best is None or best.memory is None or best.throughput is None:
        lines.append(Text(f"no recommendation: {rec.thin}", style="red"))
        return Group(*lines)
    memory, throughput = best.memory, best.throughput
    lines.append(
        Phrases(
            Text.assemble(("recommended: ", "bold green"), (describe_spec(best.spec), "bold"),
                          " — "),
            f"{throughput.samples_per_s:,.1f} samples/s"
            + (" for the job (modelled), " if best.job else f"{rate_precision(throughput)}, "),
            f"device peak {gib(memory.device_peak_bytes)} of {gib(target.memory_bytes)} ",
            f"({gib(rec.margin_left_bytes)} left), ", f"trial {best.id}",
        )
    )  # fmt: skip
    if best.job is not None:  # a job on several GPUs: its measured and modelled parts
        n = best.spec.gpus
        lines += [
            job_lines(best, best.job),
            Phrases(
                "memory is a rank's, measured (NCCL's own memory, at least "
                f"{gib(gpus.NCCL_OWN_BYTES)}, is not in it); ",
                "rates below are each job's, modelled the same way; ",
                "run it with torchrun, a process a GPU: "
                + (
                    f"--nnodes={best.job.nodes} --nproc_per_node={n // best.job.nodes}; "
                    if best.job.nodes > 1
                    else f"--nproc_per_node={n}; "
                ),
                "emit=torch prints the lines",
                style="grey50",
            ),
        ]
    if confirmation is not None and confirmation.spec.memory_cap_bytes is not None:
        cap = gib(confirmation.spec.memory_cap_bytes)
        how = (
            "its trial ran"
            if confirmation.id == best.id
            else f"confirmed: {confirmation.status.value} (trial {confirmation.id})"
        )
        lines.append(Text(f"under a cap of {cap} on the local GPU, as on the target: {how}"))
    if rec.thin:
        lines.append(Text(f"caution: {rec.thin}", style="yellow"))
    elsewhere = _measured_elsewhere(rec, best)
    if elsewhere:
        lines.append(Phrases(*elsewhere, style="yellow"))
    on_gpu = best.spec.device is Device.cuda
    lines.append(memory_table(memory, target.memory_bytes, on_gpu, of="target"))
    lines.append(memory_bar(memory, target.memory_bytes, of="target"))
    lines.append(_results_table("runners-up", rec.runners_up, target))
    front_title = "Pareto front: nothing else is both faster and smaller"
    lines.append(_results_table(front_title, rec.front, target))
    return Group(*lines)


def _measured_elsewhere(rec: Recommendation, best: TrialResult) -> list[str]:
    """What holds of trials run elsewhere than the target, in phrases: a named GPU not this
    one, or a budget measured on the CPU (a budget on this GPU ran under its cap: nothing to
    say)."""
    where = ", ".join(rec.measured_on)
    if rec.target.is_budget and best.spec.device is Device.cpu:
        return [f"throughput was measured on {where}; ", "the memory that fits transfers to a GPU ",
                "(with the same torch version), ", "the rates do not"]  # fmt: skip
    if rec.target.is_budget or rec.target.name.startswith("local"):
        return []
    return [f"throughput was measured on {where}, ", f"not on {rec.target.name}: ",
            "the memory that fits transfers ", "(with the same torch version), ",
            "the rates do not"]  # fmt: skip


def repeats_line(repeats: Sequence[TrialResult], disagreement: float | None) -> Phrases:
    """The recommended setting's measurements, and how far apart they are."""
    if disagreement is None:
        return Phrases("")
    rates = [f"{r.samples_per_s:,.1f}, " for r in repeats]
    rates[-1] = rates[-1].removesuffix(", ") + " samples/s, "
    said = [f"measured {len(repeats)} times: ", *rates, f"{disagreement:.1%} apart"]
    if disagreement > DISAGREE:
        said[-1] += ": "
        return Phrases(*said, "these measurements disagree; ", "do not take one as fact",
                       style="yellow")  # fmt: skip
    return Phrases(*said)


def resumed_line(resumed: Resumed) -> Phrases:
    """Which study a sweep took up again, and the arguments it was begun with otherwise."""
    begun = f"begun {resumed.begun_at[:16].replace('T', ' ')} UTC, " if resumed.begun_at else ""
    phrases = [
        f"resuming sweep {resumed.sweep_id} ", f"(Optuna study '{resumed.study}'), ",
        begun, f"with its {resumed.trials} trials",
    ]  # fmt: skip
    differ = [f"{a} then" for a in resumed.then or ()] + [f"{a} now" for a in resumed.now or ()]
    if differ:
        phrases[-1] += "; "
        phrases += ["arguments not as when begun: ", *(f"{d}, " for d in differ[:-1]),
                    f"{differ[-1]} ", "(the same space and target: the same sweep)"]  # fmt: skip
    return Phrases(*phrases, style="yellow" if differ else "")


def load_lines(load: LoadCheck | None) -> list[Phrases]:
    """Rates taken while other work loaded the machine differently: measured again, or said
    not to compare."""
    if load is None:
        return []
    lines = []
    for old, new in load.measured_again:
        lines.append(
            Phrases(
                "measured again under the load of now: ", f"{knobs_of(old.spec)}, ",
                f"{rate(old.throughput)}/s while others used {busy(old)} of the CPUs ",
                f"(trial {old.id}), ", f"{rate(new.throughput)}/s at {busy(new)} (trial {new.id})",
            )
        )  # fmt: skip
    if load.apart:
        loads = sorted({busy(r) for r in load.apart}, key=lambda said: float(said.rstrip("%")))
        span = loads[0] if len(loads) == 1 else f"{loads[0]} to {loads[-1]}"
        n = len(load.apart)
        lines.append(
            Phrases(
                f"caution: {n} fitting setting{'s were' if n > 1 else ' was'} ranked by rates ",
                f"taken while others used {span} of the CPUs ",
                f"(the answer's: {load.load_now:.0%}): compare them with care",
                style="yellow",
            )
        )  # fmt: skip
    return lines


def busy(result: TrialResult) -> str:
    """Others' share of the CPUs while a trial was timed ("?" where it is not known)."""
    load = result.throughput.machine_load if result.throughput else None
    return "?" if load is None else share(load)


def share(load: float) -> str:
    """A share of the CPUs, to a tenth of a point near the line a trial is flagged above
    ("others used 10%" read as under it: it was 10.4%)."""
    return f"{load:.1%}" if abs(load - LOAD_NOISE) < 0.01 else f"{load:.0%}"


def timing_line(elapsed_s: float, time_to_answer_s: float | None, within: float) -> Text:
    """How long the search took, and when it was within `within` of its answer's rate."""
    line = f"searched for {elapsed_s:.0f} s"
    if time_to_answer_s is not None:
        line += f"; within {within:.0%} of the answer after {time_to_answer_s:.0f} s"
    return Text(line, "grey50")


def baseline_line(
    baseline: TrialResult | None, versus: Against | None, rec: Recommendation
) -> Text | Phrases:
    """The recommendation against the user's own settings, in one line."""
    if baseline is None:
        return Text("your current settings were judged not to fit without running them")
    setting = describe_spec(baseline.spec)
    if baseline.status is not Status.ok:
        return Text(f"your current settings ({setting}) did not run: {baseline.status.value}")
    verdict = "fit the target" if rec.target.fits(baseline) else "do not fit the target"
    if versus is None:
        return Text(f"your current settings ({setting}) {verdict}")
    if rec.best is not None and rec.best.spec.uncapped == baseline.spec.uncapped:
        return Phrases("your current settings ", f"({setting}) ", "are the fastest that fit",
                       style="bold")  # fmt: skip
    saved = versus.memory_saved_bytes
    memory = f" and {gib(abs(saved))} {'less' if saved >= 0 else 'more'}"
    if abs(saved) < 2**20:
        memory = ", in the same memory,"
    speed = (
        f"{versus.speedup:.2f}x faster" if versus.speedup >= 1
        else f"{1 / versus.speedup:.2f}x slower"
    )  # fmt: skip
    unshown = _within_intervals(versus, baseline, rec.best)
    within: list[str | Text] = [
        "; ",
        Text("the difference is within the two rates' 95% intervals", "yellow"),
    ]
    return Phrases(
        Text(f"{speed}{memory} ", "yellow" if unshown or versus.speedup < 1 else "bold green"),
        "than your current settings ", f"({setting}), ", f"which {verdict}",
        *(within if unshown else []),
    )  # fmt: skip


def _within_intervals(versus: Against, baseline: TrialResult, best: TrialResult | None) -> bool:
    """The speedup is no more than the two rates' 95% intervals are wide (1.03x from rates
    known to ±2%: not shown to be faster)."""
    widths = [r.throughput.precision if r and r.throughput else None for r in (baseline, best)]
    known = [w for w in widths if w is not None]
    return len(known) == 2 and abs(versus.speedup - 1) <= sum(known)


def _results_table(title: str, results: Sequence[TrialResult], target: Target) -> Table:
    """The recommendation's runners-up or front: one model's trials, so each setting is its
    knobs alone (a row of tiny_mlp's at 80 columns took two lines, naming the model in each)."""
    table = Table(title=title, title_justify="left")
    for column in ("trial", "setting", "samples/s", "device peak", "fits"):
        table.add_column(column, justify="right" if column in ("trial", "samples/s") else "left")
    for r in results:
        t, m = r.throughput, r.memory
        table.add_row(
            str(r.id),
            Text(knobs_of(r.spec)),
            rate(t),
            gib(m.device_peak_bytes) if m else "-",
            "yes" if target.fits(r) else "no",
        )
    if any(r.throughput and r.throughput.cut for r in results):
        table.caption = CUT_LEGEND
    return table


def largest_batches(sweeper_largest: dict[str, tuple[TrialSpec, int, str]]) -> list[dict]:
    """Each measured family's largest micro batch predicted to fit, and what predicted it."""
    return [
        {"setting": describe_spec(spec).replace(f"batch {spec.batch_size}, ", ""),
         "largest_batch": largest, "by": by}
        for spec, largest, by in sweeper_largest.values()
    ]  # fmt: skip


def largest_batches_table(rows: list[dict], target: Target) -> Table:
    title = f"largest micro batch predicted to fit {target.label}, by setting"
    table = Table(title=Text(title, style="table.title"), title_justify="left")
    for column in ("setting", "largest batch", "by"):
        table.add_column(column, justify="right" if column == "largest batch" else "left")
    for row in rows:
        table.add_row(Text(row["setting"]), str(row["largest_batch"]), row["by"])
    return table
