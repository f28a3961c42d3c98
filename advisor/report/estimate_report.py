"""The estimate in the terminal (advisor estimate): the breakdown a fake step predicts against
the target, the largest batch, where activation memory goes, and how calibration corrects it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

from advisor.report.terminal import describe_spec, gib

if TYPE_CHECKING:  # (the estimator brings torch; the command imports this only to print)
    from advisor.estimation.corrections import Calibration
    from advisor.estimation.estimator import Estimate


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
    if not c.reserve_calibrated:
        return f"{replayed}, uncalibrated (no measured trial recomputes as this one does)"
    if c.reserve_offset is not None:
        return f"{replayed} {offset(*c.reserve_offset)}"
    if c.replay_ratio is not None:
        return f"{replayed} x{c.replay_ratio:.2f}"
    return f"x{c.reserved_factor:.2f} the peak allocated"


def estimate_report(e: Estimate) -> Group:
    """The estimated breakdown against the target, the largest batch, and where memory goes."""
    s, target = e.step, e.target
    low, high = e.device_peak_range
    largest = "-" if e.largest_batch is None else str(e.largest_batch)
    if e.largest_batch_sure is not None and e.largest_batch_sure != e.largest_batch:
        largest += f" ({e.largest_batch_sure} that fits by its upper side)"
    style = {"fits": "green", "may not fit": "yellow"}.get(e.verdict.value, "red")
    checked = (
        f" ({gib(low)} to {gib(high)} by its error where it was checked)" if low != high else ""
    )
    lines: list[Text | Table] = [
        Text(f"estimate for {describe_spec(e.spec)} on {target.label} (nothing was run)",
             style="bold"),
        Text(f"device peak {gib(e.device_peak_bytes)}{checked} of {gib(target.memory_bytes)}: "
             f"{e.verdict.value} under {gib(target.allowed_bytes)} ({target.margin:.0%} kept "
             f"free); largest micro batch by the estimate: {largest}", style=style),
    ]  # fmt: skip
    lines.extend(Text(f"not modelled: {note}", style="yellow") for note in e.unmodelled)
    lines.extend(Text(f"note: {note}") for note in e.notes)
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
        *([("cuBLAS's workspaces (default)", e.workspace_bytes)] if e.workspace_bytes else []),
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
        modules.add_row(Text(name), gib(size))  # a model's own names (a ModuleDict's keys)
    lines.append(modules)
    c = e.calibration
    if c is None:
        lines.append(
            Text(
                "not calibrated: no measured history of this model; the context, cuBLAS's "
                "workspaces and the allocator's reserve are defaults from H200 runs (how far "
                "to trust that: experiments/2026-12-03-h200-unseen-models)",
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
