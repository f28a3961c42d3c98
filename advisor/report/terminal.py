"""What a user sees in the terminal: tables and lines of results (rich); plots.py draws the
PNGs. Units appear here only; everything upstream is bytes and seconds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

from advisor.recommendation import DISAGREE, Against, Recommendation
from advisor.result import (
    Category,
    Memory,
    Status,
    Throughput,
    TrialResult,
)
from advisor.search.steps import Step, SweepProgress
from advisor.spec import Device, TrialSpec
from advisor.target import Target

if TYPE_CHECKING:  # (the estimator brings torch; history's tables need none)
    from advisor.estimation.estimator import Calibration, Estimate

# The categories of a breakdown, in the order they are stacked, with their colours.
COLOURS = {
    Category.context: "grey50",
    Category.params: "blue",
    Category.buffers: "bright_blue",
    Category.optimizer_state: "magenta",
    Category.grads: "yellow",
    Category.activations: "green",
    Category.inputs: "cyan",
}
CATEGORIES = [(c.field, c.label, COLOURS[c]) for c in Category]
OVERHEAD = ("allocator_overhead_bytes", "allocator overhead", "red")
# the same colours where a terminal's names mean nothing (the PNGs, the dashboard)
HEX = {"grey50": "#7f7f7f", "blue": "#1f77b4", "bright_blue": "#6baed6", "magenta": "#c13dbf",
       "yellow": "#e5c100", "green": "#2ca02c", "cyan": "#17becf", "red": "#d62728"}  # fmt: skip
BAR_WIDTH = 60
NOISY = 0.02  # a rate known no better than this (its 95% interval; or the IQR) is flagged
CUT_LEGEND = "≤: timing cut short once it could not beat the best; the rate is a bound"


def gib(n: float | None) -> str:
    if n is None:
        return "-"
    if abs(n) >= 2**30:
        return f"{n / 2**30:.2f} GiB"
    return f"{n / 2**20:.1f} MiB"


def offset(fixed: float, per_sample: float) -> str:
    """A calibration line, bytes + bytes per sample x batch, in words."""
    sign = {True: "+", False: "-"}
    slope = (
        gib(abs(per_sample)) if abs(per_sample) >= 2**20 else f"{abs(per_sample) / 2**10:.0f} KiB"
    )
    return f"{sign[fixed >= 0]}{gib(abs(fixed))} {sign[per_sample >= 0]} {slope} per sample"


def peak_correction(c: Calibration) -> str:
    """How calibration corrects the fake run's peak allocated, in words."""
    if c.peak_offset is None:
        return f"scaled by {c.peak_ratio:.3f}"
    return offset(*c.peak_offset)


def reserve_correction(c: Calibration) -> str:
    """How calibration turns the peak allocated into the peak reserved, in words."""
    replayed = "the step replayed through the allocator model"
    if c.reserve_offset is not None:
        return f"{replayed} {offset(*c.reserve_offset)}"
    if c.replay_ratio is not None:
        return f"{replayed} x{c.replay_ratio:.2f}"
    return f"x{c.reserved_factor:.2f} the peak allocated"


def describe(result: TrialResult) -> str:
    return describe_spec(result.spec)


def describe_spec(s: TrialSpec) -> str:
    knobs = [f"batch {s.batch_size}"]
    if s.grad_accum > 1:
        knobs.append(f"x{s.grad_accum} accum")
    knobs += [s.precision.value, s.optimizer.name]
    if s.checkpointing.value != "none":
        knobs.append(f"ckpt {s.checkpointing.value}")
    knobs += [
        name for name in ("channels_last", "compile", "expandable_segments") if getattr(s, name)
    ]
    return f"{s.model.name} on {s.device.value}: " + ", ".join(knobs)


def trial_report(result: TrialResult, device_memory: int | None) -> Group:
    """One trial: what was measured, the memory breakdown as a table and as a stacked bar."""
    title = Text(f"trial {result.id}  {describe(result)}  [{result.status.value}]", style="bold")
    if result.status is not Status.ok or result.memory is None or result.throughput is None:
        failure = result.failure
        lines = [title]
        if failure is not None:
            where = f" in {failure.phase.value}" if failure.phase else ""
            asked = f", asked for {gib(failure.requested_bytes)}" if failure.requested_bytes else ""
            lines.append(Text(f"{result.status.value}{where}{asked}: {failure.message}"))
        return Group(*lines)
    return Group(
        title,
        _memory_table(result.memory, device_memory, on_gpu=result.spec.device is Device.cuda),
        memory_bar(result.memory, device_memory),
        _throughput_line(result),
    )


def _memory_table(
    memory: Memory, device_memory: int | None, on_gpu: bool, of: str = "GPU"
) -> Table:
    """On the CPU, without what only a GPU has (a CUDA context, NVML, allocator retries);
    each figure's share of the memory it is held to, where there is one: the GPU's, or the
    target's (of="target"; a CPU sweep has one too)."""
    table = Table(title="memory (each category at its own largest)", title_justify="left")
    table.add_column("category")
    table.add_column("size", justify="right")
    shares = device_memory is not None
    if shares:
        table.add_column(f"of {of}", justify="right")
    gpu_only = {Category.context.label, "device peak (reserved + context)", "NVML, this process"}
    for key, label, colour in [*CATEGORIES, OVERHEAD]:
        if on_gpu or label not in gpu_only:
            value = getattr(memory, key)
            share = [_share(value, device_memory)] if shares else []
            table.add_row(Text(label, style=colour), gib(value), *share)
    table.add_section()
    for label, value in [
        ("peak allocated (whole trial)", memory.peak_allocated_bytes),
        ("peak reserved (whole trial)", memory.peak_reserved_bytes),
        ("peak allocated (steady state)", memory.steady_peak_allocated_bytes),
        ("device peak (reserved + context)", memory.device_peak_bytes),
        ("NVML, this process", memory.nvml_process_bytes),
    ]:
        if on_gpu or label not in gpu_only:
            table.add_row(label, gib(value), *([_share(value, device_memory)] if shares else []))
    phase = memory.peak_phase.value if memory.peak_phase else "-"
    retries = f"; allocator retries: {memory.num_alloc_retries}" if on_gpu else ""
    table.caption = f"steady peak reached in: {phase}{retries}"
    return table


def memory_bar(memory: Memory, device_memory: int | None, of: str = "GPU") -> Text:
    """The categories stacked against the GPU's memory, or the target's (of="target"); with
    neither, against the largest figure. They overlap in time, so the stack can reach past the
    device peak, marked by '|'."""
    parts = [(getattr(memory, key), colour) for key, _, colour in [*CATEGORIES, OVERHEAD]]
    scale = max(device_memory or 0, sum(size for size, _ in parts), memory.device_peak_bytes, 1)
    cells = [
        ("█", colour) for size, colour in parts for _ in range(round(BAR_WIDTH * size / scale))
    ]
    cells = (cells + [("·", "grey30")] * BAR_WIDTH)[:BAR_WIDTH]
    cells[min(BAR_WIDTH - 1, round(BAR_WIDTH * memory.device_peak_bytes / scale))] = ("|", "bold")
    if device_memory:
        said = f"device peak: {gib(memory.device_peak_bytes)} of {gib(device_memory)} {of} memory"
    else:
        said = f"peak: {gib(memory.device_peak_bytes)}; CPU: no device limit"
    legend = f"\n█ categories (stacked), | {said}"  # (its own line: beside the bar, > 80 columns)
    return Text.assemble(*cells, legend)


def _throughput_line(result: TrialResult) -> Text:
    t = result.throughput
    assert t is not None
    cpu = " on the CPU" if result.spec.device.value == "cpu" else ""
    parts = [
        f"{rate(t)} samples/s{cpu}{rate_precision(t)}",
        f"step {t.step_s_median * 1e3:.2f} ms median, IQR {t.spread:.1%} of it",
        f"{t.timed_steps} timed steps after {t.warmup_steps} warm-up",
    ]
    if t.tokens_per_s:
        parts.insert(1, f"{t.tokens_per_s:,.0f} tokens/s")
    if t.mfu is not None:
        parts.append(f"MFU {t.mfu:.1%}")
    line = Text("throughput: " + "; ".join(parts))
    if t.cut:
        line.append("\ntiming cut short: it could not beat the sweep's best", "yellow")
    if t.first_step_s is not None:
        first = "compiling" if result.spec.compile else "the first step"
        cuda = "" if cpu else " (and CUDA)"
        line.append(
            f"\ntime: building {t.setup_s:.1f} s, {first} {t.first_step_s:.1f} s, the other "
            f"warm-up {t.warmup_s:.1f} s, timing {t.timing_s:.1f} s; {result.wall_s:.1f} s in all, "
            f"with starting the process{cuda}",
            "grey50",
        )
    known = t.precision if t.precision is not None else t.spread
    if known > NOISY:
        line.append(
            f"\nnoisy: the rate is known to ±{known:.0%} only; trust it no better", "yellow"
        )
    return line


def _share(value: int | None, total: int | None) -> str:
    return f"{value / total:.1%}" if value is not None and total else "-"


def sweep_step_line(progress: SweepProgress, step: Step, trials: int) -> Text:
    """One line per spec the sweep settled: k of n measured, the spec, its fate, the best."""
    if step.result is not None and step.result.status is Status.ok and step.result.memory:
        t, m = step.result.throughput, step.result.memory
        rate = f"{t.samples_per_s:,.1f}/s{rate_precision(t)}" if t else "-"
        if t is not None and t.cut:
            rate = f"{t.samples_per_s:,.1f}/s (cut: cannot beat the best)"
        fate = f"{rate}, peak {gib(m.device_peak_bytes)} ({'fits' if step.feasible else 'too big'})"
    elif step.result is not None:
        fate = step.result.status.value
    else:
        fate = f"skipped: {step.reason}"
    best = (
        progress.best.throughput.samples_per_s if progress.best and progress.best.throughput else 0
    )
    style = "green" if step.feasible else "yellow" if step.result is None else "red"
    return Text.assemble(
        (f"[{progress.measured}/{trials} measured, {progress.elapsed_s:4.0f}s] ", "grey50"),
        f"{step.settled:13} {describe_spec(step.spec):55} ",
        (fate, style),
        (f"  best {best:,.1f}/s" if best else "", "bold"),
    )


def recommendation_report(rec: Recommendation, confirmation: TrialResult | None) -> Group:
    target = rec.target
    lines: list[Text | Table] = [
        Text(
            f"target: {'' if target.is_budget else target.name + ', '}{gib(target.memory_bytes)}, "
            f"keeping {target.margin:.0%} free "
            f"(fits under {gib(target.allowed_bytes)}); {rec.considered} measured settings",
            style="bold",
        )
    ]
    best = rec.best
    if best is None or best.memory is None or best.throughput is None:
        lines.append(Text(f"no recommendation: {rec.thin}", style="red"))
        return Group(*lines)
    memory, throughput = best.memory, best.throughput
    lines.append(
        Text.assemble(
            ("recommended: ", "bold green"),
            (describe_spec(best.spec), "bold"),
            f" — {throughput.samples_per_s:,.1f} samples/s{rate_precision(throughput)}, "
            f"device peak {gib(memory.device_peak_bytes)} of {gib(target.memory_bytes)} "
            f"({gib(rec.margin_left_bytes)} left), trial {best.id}",
        )
    )
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
        lines.append(Text(elsewhere, style="yellow"))
    on_gpu = best.spec.device is Device.cuda
    lines.append(_memory_table(memory, target.memory_bytes, on_gpu, of="target"))
    lines.append(memory_bar(memory, target.memory_bytes, of="target"))
    lines.append(_results_table("runners-up", rec.runners_up, target))
    front_title = "Pareto front: nothing else is both faster and smaller"
    lines.append(_results_table(front_title, rec.front, target))
    return Group(*lines)


def _measured_elsewhere(rec: Recommendation, best: TrialResult) -> str:
    """What holds of trials run elsewhere than the target: a named GPU not this one, or a
    budget measured on the CPU (a budget on this GPU ran under its cap: nothing to say)."""
    where = ", ".join(rec.measured_on)
    if rec.target.is_budget and best.spec.device is Device.cpu:
        return (
            f"throughput was measured on {where}: the memory that fits transfers to a GPU "
            "(with the same torch version), the rates do not"
        )
    if rec.target.is_budget or rec.target.name.startswith("local"):
        return ""
    return (
        f"throughput was measured on {where}, not on {rec.target.name}: the memory that "
        "fits transfers (with the same torch version), the rates do not"
    )


def rate_precision(throughput: Throughput | None) -> str:
    """' (±0.4%)': how well the rate is known (the median's 95% interval), where stored."""
    if throughput is None or throughput.precision is None:
        return ""
    return f" (±{throughput.precision:.1%})"


def repeats_line(repeats: Sequence[TrialResult], disagreement: float | None) -> Text:
    """The recommended setting's measurements, and how far apart they are."""
    if disagreement is None:
        return Text("")
    rates = ", ".join(f"{r.samples_per_s:,.1f}" for r in repeats)
    line = f"measured {len(repeats)} times: {rates} samples/s, {disagreement:.1%} apart"
    if disagreement > DISAGREE:
        return Text(f"{line}: these measurements disagree; do not take one as fact", "yellow")
    return Text(line)


def timing_line(elapsed_s: float, time_to_answer_s: float | None, within: float) -> Text:
    """How long the search took, and when it was within `within` of its answer's rate."""
    line = f"searched for {elapsed_s:.0f} s"
    if time_to_answer_s is not None:
        line += f"; within {within:.0%} of the answer after {time_to_answer_s:.0f} s"
    return Text(line, "grey50")


def baseline_line(
    baseline: TrialResult | None, versus: Against | None, rec: Recommendation
) -> Text:
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
        return Text(f"your current settings ({setting}) are the fastest that fit", style="bold")
    saved = versus.memory_saved_bytes
    memory = f"{gib(abs(saved))} {'less' if saved >= 0 else 'more'}"
    if abs(saved) < 2**20:
        memory = "the same memory"
    speed = (
        f"{versus.speedup:.2f}x faster" if versus.speedup >= 1
        else f"{1 / versus.speedup:.2f}x slower"
    )  # fmt: skip
    unshown = _within_intervals(versus, baseline, rec.best)
    return Text.assemble(
        (f"{speed} and {memory} ", "yellow" if unshown or versus.speedup < 1 else "bold green"),
        f"than your current settings ({setting}), which {verdict}",
        ("; the difference is within the two rates' 95% intervals" if unshown else "", "yellow"),
    )


def _within_intervals(versus: Against, baseline: TrialResult, best: TrialResult | None) -> bool:
    """The speedup is no more than the two rates' 95% intervals are wide (1.03x from rates
    known to ±2%: not shown to be faster)."""
    widths = [r.throughput.precision if r and r.throughput else None for r in (baseline, best)]
    known = [w for w in widths if w is not None]
    return len(known) == 2 and abs(versus.speedup - 1) <= sum(known)


def _results_table(title: str, results: Sequence[TrialResult], target: Target) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("trial", "setting", "samples/s", "device peak", "fits"):
        table.add_column(column, justify="right" if column in ("trial", "samples/s") else "left")
    for r in results:
        t, m = r.throughput, r.memory
        table.add_row(
            str(r.id),
            describe_spec(r.spec),
            rate(t),
            gib(m.device_peak_bytes) if m else "-",
            "yes" if target.fits(r) else "no",
        )
    if any(r.throughput and r.throughput.cut for r in results):
        table.caption = CUT_LEGEND
    return table


def rate(t: Throughput | None) -> str:
    if t is None:
        return "-"
    return f"{'≤' if t.cut else ''}{t.samples_per_s:,.1f}"


def largest_batches(sweeper_largest: dict[str, tuple[TrialSpec, int, str]]) -> list[dict]:
    """Each measured family's largest micro batch predicted to fit, and what predicted it."""
    return [
        {"setting": describe_spec(spec).replace(f"batch {spec.batch_size}, ", ""),
         "largest_batch": largest, "by": by}
        for spec, largest, by in sweeper_largest.values()
    ]  # fmt: skip


def largest_batches_table(rows: list[dict], target: Target) -> Table:
    table = Table(
        title=f"largest micro batch predicted to fit {target.name}, by setting",
        title_justify="left",
    )
    for column in ("setting", "largest batch", "by"):
        table.add_column(column, justify="right" if column == "largest batch" else "left")
    for row in rows:
        table.add_row(row["setting"], str(row["largest_batch"]), row["by"])
    return table


def estimate_report(e: Estimate) -> Group:
    """The estimated breakdown against the target, the largest batch, and where memory goes."""
    s, target = e.step, e.target
    verdict = "fits" if e.fits else "does not fit"
    lines: list[Text | Table] = [
        Text(f"estimate for {describe_spec(e.spec)} on {target.name} (nothing was run)",
             style="bold"),
        Text(f"device peak {gib(e.device_peak_bytes)} of {gib(target.memory_bytes)}: {verdict} "
             f"under {gib(target.allowed_bytes)} ({target.margin:.0%} kept free); largest micro "
             f"batch that fits: {e.largest_batch if e.largest_batch is not None else '-'}",
             style="green" if e.fits else "red"),
    ]  # fmt: skip
    if e.fits and e.device_peak_bytes > target.allowed_bytes:
        lines.append(Text("it holds more with memory to spare; within the target's limit the "
                          "allocator gives back its cache and the steps still run (allocator "
                          "model)", style="yellow"))  # fmt: skip
    if s.first_step_releases_cache:
        lines.append(Text("first steps: cuDNN's benchmark tries larger workspaces, but only "
                          "from what is free, so they do not decide a fit "
                          "(experiments/2026-11-30-h200-memory)"))  # fmt: skip
    table = Table(title="estimated memory", title_justify="left")
    table.add_column("category")
    table.add_column("size", justify="right")
    for label, value in [
        *((c.label, n) for c, n in e.categories().items()),
        ("peak allocated", e.peak_allocated_bytes),
        ("peak reserved", e.peak_reserved_bytes),
        ("device peak (reserved + context)", e.device_peak_bytes),
    ]:
        table.add_row(label, gib(value))
    lines.append(table)
    modules = Table(title="modules holding the most activation memory", title_justify="left")
    modules.add_column("module")
    modules.add_column("activations", justify="right")
    for name, size in s.top_modules:
        modules.add_row(name, gib(size))
    lines.append(modules)
    c = e.calibration
    if c is None:
        lines.append(
            Text(
                "not calibrated: no measured history of this model; the context and the "
                "allocator's reserve are defaults from H200 runs (how far to trust that: "
                "experiments/2026-11-30-estimate)",
                style="yellow",
            )
        )
    else:
        lines.append(
            Text(
                f"calibrated on {c.trials} measured trials: uncorrected error median "
                f"{c.error_median:.1%}, worst {c.error_worst:.1%}; peak {peak_correction(c)}, "
                f"reserve {reserve_correction(c)}, context {gib(c.context_bytes)}"
            )
        )
    return Group(*lines)
