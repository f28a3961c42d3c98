"""torch's MemTracker (torch.distributed._tools.mem_tracker) on fake CPU tensors, as a user without
a GPU would run it, on the specs of 2026-12-03-h200-unseen-models (issue 27's held-out set and the
second set), beside the H200's measurement and advisor's estimate of the same specs.

    PYTHONPATH=/tmp/libs517 python memtracker.py run [RUN ...]  > raw/memtracker.jsonl
    python memtracker.py table > table.md

`run` answers every spec of specs.txt (or the runs named), one JSON line each. `table` reads
raw/memtracker.jsonl, the H200's raw/runs/*.json and advisor's raw/estimates-*.jsonl of the
unseen-models experiment (read, not recomputed).

Each spec, as the H200 ran it where the CPU can:
- the workload file's model, built on the meta device and made fake with to_empty inside
  FakeTensorMode (parameters tied on meta are tied again after); a builder that cannot run on meta
  is built on the CPU for real, then moved to meta and made fake the same way;
- precision=bf16: CPU autocast to bfloat16; the fp32 precisions (default, fp32, tf32): no autocast;
- channels_last: the model and the batch's 4-D images in NHWC;
- checkpointing=blocks: torch's checkpoint_wrapper over every module of the workload's block class
  (apply_activation_checkpointing, non-reentrant), the model's use_cache off;
- the optimizer: AdamW(foreach=True) for adamw, AdamW(fused=True) for adamw_fused (the CPU has a
  fused AdamW, and it runs on fake tensors), lr 1e-3, weight decay 0.01 (conf/optimizer);
- compile=true: run eagerly (MemTracker cannot see inside a compiled step), marked so;
- two steps (forward, backward, optimizer step, zero_grad(set_to_none=True)); after the first, the
  tracker's module stats are reset (reset_mod_stats) and so is its running peak (a private field:
  MemTracker has no public reset of it); the figure is the second step's peak, all categories.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import signal
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker
from torch.utils._pytree import tree_leaves, tree_map

HERE = Path(__file__).resolve().parent
UNSEEN = HERE.parent / "2026-12-03-h200-unseen-models"
SETS = ("heldout", "second")
GB = 1e9
CPU = torch.device("cpu")
TIMEOUT_S = 1800  # one spec, at most


def specs() -> list[tuple[str, str, list[str]]]:
    """(set, workload file, settings) of each line of specs.txt, in order."""
    rows = []
    for line in (UNSEEN / "specs.txt").read_text().splitlines():
        if line.split(" ", 1)[0] in SETS:
            chosen_set, name, *settings = line.split()
            rows.append((chosen_set, name, settings))
    return rows


def run_name(name: str, settings: list[str]) -> str:
    """The file name measure.sh gave the spec's run (compare.py's run_name)."""
    return "_".join([name, *settings]).replace("=", "-")


def load_workload(chosen_set: str, name: str) -> Any:
    path = UNSEEN / chosen_set / f"{name}.py"
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))  # (nanogpt.py imports its neighbour)
    spec = importlib.util.spec_from_file_location(f"memtracker_{chosen_set}_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.workload()


def tied_groups(model: nn.Module) -> list[list[tuple[nn.Module, str]]]:
    """The (module, attribute) places that share one parameter, for each parameter in more than
    one place."""
    places: dict[int, list[tuple[nn.Module, str]]] = {}
    for module in model.modules():
        for attribute, parameter in module.named_parameters(recurse=False):
            places.setdefault(id(parameter), []).append((module, attribute))
    return [group for group in places.values() if len(group) > 1]


def build(work: Any) -> tuple[nn.Module, str]:
    """The model on the meta device, and how it was built: on meta, or (a builder that reads
    values) on the CPU for real and then moved to meta."""
    try:
        with torch.device("meta"):
            model = work.model()
        how = "meta"
    except Exception as error:
        with torch.device(CPU):
            model = work.model()
        model = model.to("meta")
        how = f"cpu then meta (on meta: {type(error).__name__}: {one_line(error)[:80]})"
    return model.train(), how


def one_line(error: BaseException) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else ""


def where(error: BaseException) -> str:
    """The raising line, and the last line outside torch that led to it (the model's code, or
    this script)."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return "?"
    names = [f"{Path(f.filename).name}:{f.lineno}" for f in frames]
    outside = [n for f, n in zip(frames, names, strict=True) if "/torch/" not in f.filename]
    return names[-1] + (f" (from {outside[-1]})" if outside and outside[-1] != names[-1] else "")


class TookTooLong(BaseException):
    pass


def fake_training(
    mode: FakeTensorMode, chosen_set: str, name: str, settings: list[str]
) -> dict[str, Any]:
    """The spec's model, optimizer and batch as fake CPU tensors of the mode, its autocast, and
    how each was set up. The model is built outside the mode (on meta, or for real on the CPU)."""
    setting = dict(s.split("=", 1) for s in settings)
    precision = setting.get("precision", "default")
    optimizer_name = setting.get("optimizer", "adamw")
    checkpointing = setting.get("checkpointing", "none") == "blocks"
    channels_last = setting.get("channels_last", "false") == "true"
    batch_size = int(setting["batch_size"])
    work = load_workload(chosen_set, name)
    meta_model, how = build(work)
    groups = tied_groups(meta_model)
    if channels_last:
        meta_model = meta_model.to(memory_format=torch.channels_last)
    with mode:
        model = meta_model.to_empty(device=CPU)
        for group in groups:  # to_empty gives each place its own tensor: tie them again
            first_module, first_attribute = group[0]
            shared = getattr(first_module, first_attribute)
            for module, attribute in group[1:]:
                setattr(module, attribute, shared)
        if checkpointing:
            from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
                apply_activation_checkpointing,
            )

            block = work.block_name
            apply_activation_checkpointing(model, check_fn=lambda m: type(m).__name__ == block)
            config = getattr(model, "config", None)
            if config is not None and getattr(config, "use_cache", False):
                config.use_cache = False
        implementation = {"adamw": "foreach", "adamw_fused": "fused"}[optimizer_name]
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=1e-3, weight_decay=0.01, **{implementation: True}
        )
        batch = work.batch(batch_size, CPU)
        if channels_last:
            batch = tree_map(
                lambda v: (
                    v.contiguous(memory_format=torch.channels_last)
                    if isinstance(v, torch.Tensor) and v.dim() == 4 and v.is_floating_point()
                    else v
                ),
                batch,
            )
    return {
        "work": work,
        "model": model,
        "optimizer": optimizer,
        "batch": batch,
        "autocast": (
            functools.partial(torch.autocast, "cpu", dtype=torch.bfloat16)
            if precision == "bf16"
            else contextlib.nullcontext
        ),
        "info": {
            "built": how,
            "optimizer": f"AdamW({implementation}=True)",
            "autocast": "cpu bf16" if precision == "bf16" else None,
            "ran_eagerly_for_compile": setting.get("compile", "false") == "true",
        },
    }


def memtracker_peak(chosen_set: str, name: str, settings: list[str]) -> dict[str, Any]:
    """MemTracker's peak of the spec's second step, its breakdown, and how the step was set up."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    t = fake_training(mode, chosen_set, name, settings)
    with mode:
        work, model, optimizer, batch = t["work"], t["model"], t["optimizer"], t["batch"]
        tracker = MemTracker()
        tracker.track_external(
            model, optimizer, *[x for x in tree_leaves(batch) if isinstance(x, torch.Tensor)]
        )
        peaks = []
        with tracker:
            for step in range(2):
                with t["autocast"]():
                    loss = work.compute_loss(model, batch)
                loss.backward()
                del loss
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                peaks.append(tracker.get_tracker_snapshot("peak")[CPU])
                if step == 0:
                    tracker.reset_mod_stats()
                    current = tracker.get_tracker_snapshot("current")
                    tracker._peak_mem_snap = current  # no public reset of the running peak
                    tracker._peak_mem = {dev: snap["Total"] for dev, snap in current.items()}
    first, second = peaks
    return {
        "peak_bytes": int(second["Total"]),
        "first_step_peak_bytes": int(first["Total"]),
        "peak_breakdown": {k: int(v) for k, v in second.items() if k != "Total"},
        **t["info"],
    }


def run(chosen: list[str]) -> None:
    def expire(*_: object) -> None:
        raise TookTooLong

    signal.signal(signal.SIGALRM, expire)
    for chosen_set, name, settings in specs():
        row: dict[str, Any] = {"set": chosen_set, "run": run_name(name, settings)}
        if chosen and row["run"] not in chosen:
            continue
        started = time.perf_counter()
        signal.alarm(TIMEOUT_S)
        try:
            with contextlib.redirect_stdout(sys.stderr):  # (a model's own prints)
                row |= memtracker_peak(chosen_set, name, settings)
        except (Exception, TookTooLong) as error:
            row["error"] = f"{type(error).__name__} at {where(error)}: {one_line(error)[:200]}"
        finally:
            signal.alarm(0)
        print(json.dumps(row | {"seconds": round(time.perf_counter() - started, 1)}), flush=True)


def truth(run_name_: str) -> tuple[int, int] | None:
    """The H200's steady peak allocated and steady device peak (compare.py's reading)."""
    path = UNSEEN / "raw" / "runs" / f"{run_name_}.json"
    if not path.exists():
        return None
    result = json.loads(path.read_text())
    if result["status"] != "ok":
        return None
    m = result["memory"]
    return m["steady_peak_allocated_bytes"], m["steady_peak_reserved_bytes"] + m["context_bytes"]


def jsonl(path: Path) -> dict[str, dict[str, Any]]:
    return {(r := json.loads(line))["run"]: r for line in path.read_text().splitlines()}


def table() -> None:
    tracked = jsonl(HERE / "raw" / "memtracker.jsonl")
    estimates: dict[str, dict[str, Any]] = {}
    for chosen_set in SETS:
        estimates |= jsonl(UNSEEN / "raw" / f"estimates-{chosen_set}.jsonl")
    print("# torch's MemTracker (fake CPU tensors) and advisor's estimate against the H200\n")
    print("GB = 1e9 bytes. Errors are figure / H200 - 1. H200 peak alloc: steady peak allocated; "
          "H200 device peak: steady peak reserved + CUDA context. advisor's figures are read from "
          "../2026-12-03-h200-unseen-models/raw/estimates-*.jsonl. Compiled specs: MemTracker ran "
          "the step eagerly.\n")  # fmt: skip
    print("| spec | H200 peak alloc GB | H200 device peak GB | MemTracker GB | vs alloc "
          "| vs device | advisor alloc GB | vs alloc | advisor device GB | vs device |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    errors: dict[str, list[float]] = {k: [] for k in ("mt_a", "mt_d", "adv_a", "adv_d")}
    notes = []
    compiled: list[bool] = []  # of each spec in errors
    for _, name, settings in specs():
        run_ = run_name(name, settings)
        label = run_ + (" (MemTracker eager)" if "compile=true" in settings else "")
        t, mt, est = truth(run_), tracked.get(run_), estimates.get(run_)
        cells = [label]
        cells += [f"{t[0] / GB:.2f}", f"{t[1] / GB:.2f}"] if t else ["not measured", ""]
        if mt is None or "error" in mt:
            cells += ["failed" if mt else "not run", "", ""]
            if mt:
                notes.append(f"- MemTracker, {run_}: {mt['error']}")
        else:
            p = mt["peak_bytes"]
            cells.append(f"{p / GB:.2f}")
            cells += [f"{p / t[0] - 1:+.1%}", f"{p / t[1] - 1:+.1%}"] if t else ["", ""]
        if est is None or "error" in est:
            cells += ["failed" if est else "none", "", "", ""]
            if est:
                notes.append(f"- advisor, {run_}: {est['error'][:160]}")
        else:
            a, d = est["memory"]["peak_allocated_bytes"], est["memory"]["device_peak_bytes"]
            cells += [f"{a / GB:.2f}", f"{a / t[0] - 1:+.1%}" if t else ""]
            cells += [f"{d / GB:.2f}", f"{d / t[1] - 1:+.1%}" if t else ""]
        both = t and mt and "error" not in mt and est and "error" not in est
        if both:
            errors["mt_a"].append(mt["peak_bytes"] / t[0] - 1)
            errors["mt_d"].append(mt["peak_bytes"] / t[1] - 1)
            errors["adv_a"].append(est["memory"]["peak_allocated_bytes"] / t[0] - 1)
            errors["adv_d"].append(est["memory"]["device_peak_bytes"] / t[1] - 1)
            compiled.append("compile=true" in settings)
        print("| " + " | ".join(cells) + " |")
    eager = [c for c in compiled if not c]
    for title, keep in (
        (f"the {len(compiled)} specs that the H200 measured and both answered", compiled),
        (f"the {len(eager)} of them run eagerly on the H200 (no compile=true)", eager),
    ):
        chosen = [i for i, c in enumerate(compiled) if keep is compiled or not c]
        print(f"\nOver {title}:\n")
        print("| figure | against | median error | median abs error | worst over | worst under "
              "| within [-2%, +5%] |")  # fmt: skip
        print("|---|---|---|---|---|---|---|")
        for key, who, against in (
            ("mt_a", "MemTracker", "H200 peak allocated"),
            ("mt_d", "MemTracker", "H200 device peak"),
            ("adv_a", "advisor peak allocated", "H200 peak allocated"),
            ("adv_d", "advisor device peak", "H200 device peak"),
        ):
            e = [errors[key][i] for i in chosen]
            print(
                f"| {who} | {against} | {statistics.median(e):+.1%} "
                f"| {statistics.median(abs(x) for x in e):.1%} | {max(e):+.1%} "
                f"| {min(e):+.1%} | {sum(-0.02 <= x <= 0.05 for x in e)} of {len(e)} |"
            )
    if notes:
        print("\nFailures:\n")
        print("\n".join(notes))


if __name__ == "__main__":
    verb = sys.argv[1]
    if verb == "run":
        run(sys.argv[2:])
    elif verb == "table":
        table()
    else:
        raise SystemExit(__doc__)
