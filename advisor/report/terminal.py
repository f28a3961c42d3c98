"""What a user sees of a trial in the terminal (rich), and the words every report shares: sizes,
rates, a setting described, the categories' colours. Units appear here and in the other
reports only; everything upstream is bytes and seconds. plots.py draws the PNGs."""

from __future__ import annotations

from collections.abc import Iterator

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from advisor import gpus
from advisor.communication import carried_bytes
from advisor.result import (
    Category,
    JobStep,
    Kind,
    Memory,
    Status,
    Throughput,
    TrialResult,
)
from advisor.spec import Device, TrialSpec

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
    """A size in the unit that shows it (gpus.size_text), "-" for none."""
    return "-" if n is None else gpus.size_text(n)


class Phrases:
    """A line of phrases that a narrow terminal breaks between phrases, not inside one: at 80
    columns, show's "10 timed steps after 3 warm-up" read "10 timed / steps after 3 warm-up".
    A phrase wider than the terminal wraps as any text does."""

    def __init__(self, *phrases: str | Text, style: str = "") -> None:
        """Each phrase ends in what separates it from the next ("median, ", "of it; ")."""
        self.phrases = [Text(p) if isinstance(p, str) else p for p in phrases]
        self.style = style

    @property
    def plain(self) -> str:
        """The line's words, unbroken."""
        return "".join(phrase.plain for phrase in self.phrases)

    def joined(self) -> Text:
        """The line unbroken, with its styles: one line of a log, however long."""
        return Text.assemble(*self.phrases, style=self.style)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        line = Text(style=self.style)
        for phrase in self.phrases:
            ends = line.cell_len + cell_len(phrase.plain.rstrip())
            if line.plain.strip() and ends > options.max_width:
                line.rstrip()
                yield line
                line = Text(style=self.style)
            line.append_text(phrase)
        line.rstrip()
        yield line

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max((cell_len(p.plain.rstrip()) for p in self.phrases), default=0)
        return Measurement(widest, sum(p.cell_len for p in self.phrases))


def describe(result: TrialResult) -> str:
    return describe_spec(result.spec)


def describe_spec(s: TrialSpec) -> str:
    on = f"rank 0 of {s.gpus} {s.device.value}" if s.gpus > 1 else s.device.value
    return f"{s.model.name} on {on}: {knobs_of(s)}"


def knobs_of(s: TrialSpec) -> str:
    """A setting's knobs, without the model and device that a table of one model's trials
    names once."""
    knobs = [s.strategy.value] if s.strategy else []
    if s.replicas > 1:  # hsdp: replicas of a node's shards
        knobs[-1] += f" {s.replicas}x{s.gpus // s.replicas}"
    said = {
        "reshard_after_forward": lambda v: "no reshard after forward",
        "param_dtype": lambda v: f"gather {v}",
        "reduce_dtype": lambda v: f"reduce {v}",
    }
    knobs += [said[k](v) for k, v in s.fsdp_knobs().items()]
    knobs.append(f"batch {s.batch_size}")
    if s.grad_accum > 1:
        knobs.append(f"x{s.grad_accum} accum")
    knobs += [s.precision.value, s.optimizer.name]
    if s.checkpointing.value != "none":
        knobs.append(f"ckpt {s.checkpointing.value}")
    knobs += [
        name for name in ("channels_last", "compile", "expandable_segments") if getattr(s, name)
    ]
    return ", ".join(knobs)


def trial_report(result: TrialResult, device_memory: int | None) -> Group:
    """One trial: what was measured, the memory breakdown as a table and as a stacked bar."""
    title = Text(f"trial {result.id}  {describe(result)}  [{result.status.value}]", style="bold")
    if result.kind is Kind.training:
        return _training_report(result, device_memory, title)
    if result.status is not Status.ok or result.memory is None or result.throughput is None:
        failure = result.failure
        lines = [title]
        if failure is not None:
            where = f" in {failure.phase.value}" if failure.phase else ""
            asked = f", asked for {gib(failure.requested_bytes)}" if failure.requested_bytes else ""
            lines.append(Text(f"{result.status.value}{where}{asked}: {failure.message}"))
        return Group(*lines)
    ranks = []
    if result.spec.gpus > 1:  # (what the fake process group shows, and what it does not)
        ranks = [Text(
            f"one rank of {result.spec.gpus}, on torch's fake process group: its memory and "
            "compute; no communication was made, and none is in the rate (the job's step, "
            "with it modelled, follows)", style="grey50",
        )]  # fmt: skip
    return Group(
        title,
        *ranks,
        memory_table(result.memory, device_memory, on_gpu=result.spec.device is Device.cuda),
        memory_bar(result.memory, device_memory),
        _throughput_lines(result),
    )


def _training_report(result: TrialResult, device_memory: int | None, title: Text) -> Group:
    """A training run of the user's: what it recorded (no bar: its activations are not told
    apart), and the measured trial it followed."""
    lines: list[RenderableType] = [
        title,
        Text(
            f"a training run, following the setting measured in trial {result.follows}: "
            f"advisor compare {result.follows} {result.id}",
            style="grey50",
        ),  # fmt: skip
    ]
    if result.failure is not None:
        lines.append(Text(f"{result.status.value}: {result.failure.message}"))
    if result.memory is not None:
        lines.append(memory_table(result.memory, device_memory, on_gpu=True, training=True))
    if result.throughput is not None:
        lines.append(_throughput_lines(result))
    return Group(*lines)


def memory_table(
    memory: Memory, device_memory: int | None, on_gpu: bool, of: str = "GPU", training: bool = False
) -> Table:
    """On the CPU, without what only a GPU has (a CUDA context, NVML, allocator retries);
    each figure's share of the memory it is held to, where there is one: the GPU's, or the
    target's (of="target"; a CPU sweep has one too). A training run's, without what it does
    not tell apart (activations, inputs)."""
    table = Table(title="memory (each category at its own largest)", title_justify="left")
    table.add_column("category")
    table.add_column("size", justify="right")
    shares = device_memory is not None
    if shares:
        table.add_column(f"of {of}", justify="right")
    gpu_only = {Category.context.label, "device peak (reserved + context)", "NVML, this process"}
    untold = {Category.activations.field, Category.inputs.field} if training else set()
    for key, label, colour in [*CATEGORIES, OVERHEAD]:
        if key in untold:
            continue
        if on_gpu or label not in gpu_only:
            value = getattr(memory, key)
            share = [_share(value, device_memory)] if shares else []
            table.add_row(Text(label, style=colour), gib(value), *share)
    table.add_section()
    for label, value in [
        ("peak allocated (whole trial)", memory.peak_allocated_bytes),
        ("peak reserved (whole trial)", memory.peak_reserved_bytes),
        (
            f"peak allocated ({'timed steps' if training else 'steady state'})",
            memory.steady_peak_allocated_bytes,
        ),
        ("device peak (reserved + context)", memory.device_peak_bytes),
        ("NVML, this process", memory.nvml_process_bytes),
    ]:
        if on_gpu or label not in gpu_only:
            table.add_row(label, gib(value), *([_share(value, device_memory)] if shares else []))
    phase = memory.peak_phase.value if memory.peak_phase else "-"
    retries = f"; allocator retries: {memory.num_alloc_retries}" if on_gpu else ""
    table.caption = f"steady peak reached in: {phase}{retries}"
    return table


def stacked(memory: Memory, device_memory: int | None) -> tuple[list[tuple[str, int, str]], int]:
    """The breakdown as one stack, as every memory bar draws it (here, the dashboard's, the
    PNG): (label, bytes, colour) in stacking order, and the scale it is drawn against: the
    GPU's memory, or with none the largest figure."""
    parts = [
        (label, getattr(memory, key), colour) for key, label, colour in [*CATEGORIES, OVERHEAD]
    ]
    scale = max(device_memory or 0, sum(size for _, size, _ in parts), memory.device_peak_bytes, 1)
    return parts, scale


def memory_bar(memory: Memory, device_memory: int | None, of: str = "GPU") -> Text:
    """The categories stacked against the GPU's memory, or the target's (of="target"); with
    neither, against the largest figure. They overlap in time, so the stack can reach past the
    device peak, marked by '|'."""
    parts, scale = stacked(memory, device_memory)
    cells = [("█", colour) for _, size, colour in parts
             for _ in range(round(BAR_WIDTH * size / scale))]  # fmt: skip
    cells = (cells + [("·", "grey30")] * BAR_WIDTH)[:BAR_WIDTH]
    cells[min(BAR_WIDTH - 1, round(BAR_WIDTH * memory.device_peak_bytes / scale))] = ("|", "bold")
    if device_memory:
        said = f"device peak: {gib(memory.device_peak_bytes)} of {gib(device_memory)} {of} memory"
    else:
        said = f"peak: {gib(memory.device_peak_bytes)}; CPU: no device limit"
    legend = f"\n█ categories (stacked), | {said}"  # (its own line: beside the bar, > 80 columns)
    return Text.assemble(*cells, legend)


def _throughput_lines(result: TrialResult) -> Group:
    t = result.throughput
    assert t is not None
    cpu = " on the CPU" if result.spec.device.value == "cpu" else ""
    ranks = result.spec.gpus
    said = f"{ranks} ranks' samples over rank 0's step, no communication: " if ranks > 1 else ""
    rates = [f"throughput: {said}{rate(t)} samples/s{cpu}{rate_precision(t)}"]
    if t.tokens_per_s:
        rates.append(f"{t.tokens_per_s:,.0f} tokens/s")
    steps = [f"step {t.step_s_median * 1e3:.2f} ms median, ", f"IQR {t.spread:.1%} of it; ",
             f"{t.timed_steps} timed steps after {t.warmup_steps} warm-up"]  # fmt: skip
    if t.mfu is not None:
        steps[-1] += "; "
        steps.append(f"MFU {t.mfu:.1%}")
    lines: list[Text | Phrases] = [Phrases(*[f"{r}; " for r in rates], *steps)]
    if t.cut:
        lines.append(Text("timing cut short: it could not beat the sweep's best", "yellow"))
    if t.first_step_s is not None:
        first = "compiling" if result.spec.compile else "the first step"
        cuda = "" if cpu else " (and CUDA)"
        lines.append(Phrases(
            f"time: building {t.setup_s:.1f} s, ", f"{first} {t.first_step_s:.1f} s, ",
            f"the other warm-up {t.warmup_s:.1f} s, ", f"timing {t.timing_s:.1f} s; ",
            f"{result.wall_s:.1f} s in all, with starting the process{cuda}"
            + ("; " if t.machine_load is not None else ""),
            *([f"others used {t.machine_load:.0%} of the CPUs while it timed"]
              if t.machine_load is not None else []),
            style="grey50",
        ))  # fmt: skip
    known = t.precision if t.precision is not None else t.spread
    if known > NOISY:
        lines.append(Text(f"noisy: the rate is known to ±{known:.0%} only; trust it no better",
                          "yellow"))  # fmt: skip
    return Group(*lines)


def job_lines(result: TrialResult, job: JobStep | str | None) -> Group:
    """The whole job's step modelled from a rank's trial (communication.py), each figure said
    as measured or modelled; or why it is not modelled."""
    if job is None:
        return Group()
    if isinstance(job, str):
        return Group(Text(f"the job's step is not modelled: {job}", style="yellow"))
    t = result.throughput
    assert t is not None
    carried = [f"{kind.value.replace('_', '-')} {gib(nbytes)}"
               for kind, nbytes in (carried_bytes(t) or {}).items() if nbytes]  # fmt: skip
    copies = (f"measured {seconds(job.measured_s)}, less the fake group's copies "
              f"{seconds(job.local_copies_s)}" if job.local_copies_s else "measured")  # fmt: skip
    return Group(
        Phrases(
            f"the job on {result.spec.gpus} GPUs: {job.samples_per_s:,.1f} samples/s, ",
            f"step {seconds(job.step_s)} (modelled) = ",
            f"compute {seconds(job.compute_s)} ({copies}) ",
            f"+ communication not hidden {seconds(job.exposed_s)} ",
            f"(of {seconds(job.communication_s)} on the wire: ",
            f"{', '.join(carried)} a step, in {t.collectives} collective"
            + ("s)" if t.collectives != 1 else ")"),
            style="bold",
        ),
        Phrases(f"modelled: {job.how}", style="grey50"),
    )


def seconds(s: float) -> str:
    """A short time in the unit that shows it: 12.34 ms, 4.1 µs."""
    return f"{s * 1e3:.2f} ms" if s >= 1e-4 or s == 0 else f"{s * 1e6:.1f} µs"


def _share(value: int | None, total: int | None) -> str:
    return f"{value / total:.1%}" if value is not None and total else "-"


def rate_precision(throughput: Throughput | None) -> str:
    """' (±0.4%)': how well the rate is known (the median's 95% interval), where stored."""
    if throughput is None or throughput.precision is None:
        return ""
    return f" (±{throughput.precision:.1%})"


def rate(t: Throughput | None) -> str:
    if t is None:
        return "-"
    return f"{'≤' if t.cut else ''}{t.samples_per_s:,.1f}"
