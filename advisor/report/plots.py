"""Pictures of results (matplotlib, without a display): a trial's memory breakdown and a sweep's
throughput against memory, as PNG files, or SVG for the dashboard. Figures are made without
pyplot, whose state is global, and one at a time: the dashboard serves from several threads,
and matplotlib promises nothing of its caches across them."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, ParamSpec

from advisor.recommendation import Recommendation
from advisor.report.terminal import HEX, describe, gib, stacked
from advisor.result import Status, TrialResult

P = ParamSpec("P")
_DRAWING = threading.Lock()


def _one_at_a_time(draw: Callable[P, None]) -> Callable[P, None]:
    @functools.wraps(draw)
    def drawn(*args: P.args, **kwargs: P.kwargs) -> None:
        with _DRAWING:
            draw(*args, **kwargs)

    return drawn


@_one_at_a_time
def save_memory_png(result: TrialResult, device_memory: int | None, path: Path) -> None:
    """The stacked bar as a PNG: categories against the GPU's memory, the device peak marked."""
    from matplotlib.figure import Figure

    memory = result.memory
    assert memory is not None
    fig = Figure(figsize=(9, 2.4))
    ax = fig.subplots()
    left = 0.0
    for label, size, colour in stacked(memory, device_memory)[0]:
        value = size / 2**30
        ax.barh(0, value, left=left, color=HEX[colour], label=f"{label} {gib(value * 2**30)}")
        left += value
    ax.axvline(memory.device_peak_bytes / 2**30, color="black", linestyle="--", label="device peak")
    if device_memory:
        ax.axvline(device_memory / 2**30, color="black", linewidth=2, label="GPU memory")
    ax.set_yticks([])
    ax.set_xlabel("GiB")
    ax.set_title(describe(result), fontsize=9, parse_math=False)  # a name's $: not mathtext
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.45), ncol=4)
    fig.savefig(path, dpi=120, bbox_inches="tight")


def save_sweep_png(results: Sequence[TrialResult], rec: Recommendation, path: Path) -> None:
    save_sweep(results, rec, path, "png")


@_one_at_a_time
def save_sweep(
    results: Sequence[TrialResult], rec: Recommendation, file: Path | IO[bytes], fmt: str
) -> None:
    """Throughput against device peak for every measured setting, the budget line, the Pareto
    front, and the recommendation marked; fmt: png or svg."""
    from matplotlib.figure import Figure

    target = rec.target
    ok = [r for r in results if r.status is Status.ok and r.memory and r.throughput]
    scale, unit = (2**30, "GiB") if target.allowed_bytes >= 2**30 else (2**20, "MiB")
    fig = Figure(figsize=(8, 5))
    ax = fig.subplots()
    for fits, colour, label in ((True, "#2ca02c", "fits"), (False, "#d62728", "too big")):
        chosen = [r for r in ok if target.fits(r) is fits]
        ax.scatter(
            [r.memory.device_peak_bytes / scale for r in chosen],  # type: ignore[union-attr]
            [r.throughput.samples_per_s for r in chosen],  # type: ignore[union-attr]
            color=colour,
            label=label,
            alpha=0.7,
        )
    front = rec.front
    ax.plot(
        [r.memory.device_peak_bytes / scale for r in front],  # type: ignore[union-attr]
        [r.throughput.samples_per_s for r in front],  # type: ignore[union-attr]
        color="grey",
        linestyle=":",
        label="Pareto front",
    )
    ax.axvline(
        target.allowed_bytes / scale,
        color="black",
        linestyle="--",
        label=f"budget {gib(target.allowed_bytes)}",
    )
    if rec.best is not None and rec.best.memory and rec.best.throughput:
        ax.scatter(
            [rec.best.memory.device_peak_bytes / scale],
            [rec.best.throughput.samples_per_s],
            marker="*",
            s=300,
            color="gold",
            edgecolor="black",
            label="recommended",
            zorder=5,
        )
    ax.set_xlabel(f"device peak (reserved + context), {unit}")
    ax.set_ylabel("samples/s")
    title = f"{rec.best.spec.model.name if rec.best else ''} sweep for {target.label}"
    ax.set_title(title, parse_math=False)  # a name's $...$ is not mathtext
    ax.legend(fontsize=8, loc="lower right")
    fig.savefig(file, format=fmt, dpi=120, bbox_inches="tight")
