"""advisor's uncalibrated estimate of the catalog's compiled specs (and their eager twins) on the
H200 machine's CPU, so that the estimate's torch and inductor are the ones the truth was
measured with (torch 2.11); public API only. The specs and the truth are
../2026-12-03-compile-estimate-catalog's (specs.txt, raw/truth.jsonl).

    python3 estimate.py run OUT.jsonl [PROCESSES]   # one fresh process per estimate
    python3 estimate.py table ESTIMATES.jsonl       # error against the truth, as markdown
    python3 estimate.py run-unseen OUT.jsonl [PROCESSES]
    python3 estimate.py table-unseen ESTIMATES.jsonl

"unseen": the 12 compiled specs of held-out models in ../2026-12-03-h200-compile-unseen
(specs.txt; the truth in its raw/runs, the workloads in ../2026-12-03-h200-unseen-models).
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parent.parent
CATALOG = EXPERIMENTS / "2026-12-03-compile-estimate-catalog"
UNSEEN = EXPERIMENTS / "2026-12-03-h200-compile-unseen"
MODELS = EXPERIMENTS / "2026-12-03-h200-unseen-models"


def truths() -> dict[str, dict]:
    rows = [json.loads(line) for line in (CATALOG / "raw" / "truth.jsonl").read_text().splitlines()]
    return {row["settings"]: row for row in rows}


def unseen() -> list[tuple[str, str, list[str]]]:
    """(run name, workload, settings) of each compiled held-out spec."""
    rows = []
    for line in (UNSEEN / "specs.txt").read_text().splitlines():
        if line.startswith(("heldout ", "second ")):
            chosen_set, name, *settings = line.split()
            run = "_".join([name, *settings]).replace("=", "-")  # measure.sh's name for it
            rows.append((run, f"{MODELS / chosen_set / name}.py:workload", settings))
    return rows


def estimate(settings: str) -> dict:
    values = dict(item.split("=", 1) for item in settings.split())
    model = values.pop("model")
    return {"settings": settings} | estimated(model, [f"{k}={v}" for k, v in values.items()])


def estimate_unseen(spec: tuple[str, str, list[str]]) -> dict:
    run, workload, settings = spec
    return {"run": run} | estimated(workload, settings)


def estimated(model: str, settings: list[str]) -> dict:
    import advisor  # in the worker: each estimate in a process of its own

    row: dict = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as empty, contextlib.redirect_stdout(io.StringIO()):
        try:
            result = advisor.estimate(
                model,
                overrides=[*settings, "gpu=h200", f"db_url=sqlite:///{empty}/fresh.sqlite"],
            )
        except Exception as error:  # kept: an estimate that cannot answer is a result
            row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0]}"
        else:
            row |= result.to_dict()
    return row | {"seconds": round(time.perf_counter() - started, 1)}


def run(out: str, processes: int = 12) -> None:
    specs = list(truths())
    specs.sort(key=lambda s: ("compile=true" not in s, "gpt2" not in s))  # slow ones first
    in_processes(estimate, specs, out, processes)


def in_processes(function, items: list, out: str, processes: int) -> None:
    context = multiprocessing.get_context("spawn")
    with context.Pool(processes, maxtasksperchild=1) as pool, open(out, "w") as sink:
        for row in pool.imap_unordered(function, items):
            sink.write(json.dumps(row) + "\n")
            sink.flush()


def table_unseen(path: str) -> None:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
    print("| spec | measured GB | estimate GB | error | device measured | device estimate | "
          "error | notes |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    alloc, device = [], []
    for row in sorted(rows, key=lambda r: r["run"]):
        if "error" in row:
            print(f"| {row['run']} | | | {row['error'][:90]} | | | | |")
            continue
        truth = json.loads((UNSEEN / "raw" / "runs" / f"{row['run']}.json").read_text())["memory"]
        real = truth["steady_peak_allocated_bytes"]
        real_device = truth["steady_peak_reserved_bytes"] + truth["context_bytes"]
        est, est_device = row["memory"]["peak_allocated_bytes"], row["memory"]["device_peak_bytes"]
        alloc.append(est / real - 1)
        device.append(est_device / real_device - 1)
        notes = "; ".join(row.get("unmodelled", []))
        print(f"| {row['run']} | {real / 1e9:.2f} | {est / 1e9:.2f} | {alloc[-1]:+.1%} | "
              f"{real_device / 1e9:.2f} | {est_device / 1e9:.2f} | {device[-1]:+.1%} | {notes} |")  # fmt: skip
    for label, errors in (("peak allocated", alloc), ("device peak", device)):
        if errors:
            print(f"\n{label}: {len(errors)} specs, median |error| "
                  f"{statistics.median(abs(x) for x in errors):.1%}, worst under "
                  f"{min(errors):+.1%}, worst over {max(errors):+.1%}, within [-2%, +5%]: "
                  f"{sum(-0.02 <= x <= 0.05 for x in errors)}")  # fmt: skip


def table(path: str) -> None:
    truth = truths()
    rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
    print("| set | spec | compiled | measured GB | estimate GB | error | device measured | "
          "device estimate | error |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    errors: dict[tuple[str, bool, str], list[float]] = {}
    for row in sorted(rows, key=lambda r: r["settings"]):
        t = truth[row["settings"]]
        compiled = "compile=true" in row["settings"]
        if "error" in row:
            print(f"| {t['set']} | {row['settings']} | {compiled} | | | {row['error']} | | | |")
            continue
        real = t["memory"]["steady_peak_allocated_bytes"]
        # the catalog's device peak: the steady steps' peak reserved and the CUDA context
        real_device = t["memory"]["steady_peak_reserved_bytes"] + t["memory"]["context_bytes"]
        est = row["memory"]["peak_allocated_bytes"]
        est_device = row["memory"]["device_peak_bytes"]
        error, device_error = est / real - 1, est_device / real_device - 1
        errors.setdefault((t["set"], compiled, "peak allocated"), []).append(error)
        errors.setdefault((t["set"], compiled, "device peak"), []).append(device_error)
        values = dict(w.split("=", 1) for w in row["settings"].split())
        short = " ".join(values[k] for k in ("model", "batch_size", "precision", "optimizer"))
        short += "".join(
            f" {flag}"
            for flag, key in (
                ("ckpt", "checkpointing"),
                ("cl", "channels_last"),
                ("es", "expandable_segments"),
            )  # fmt: skip
            if values[key] not in ("none", "false")
        )
        print(f"| {t['set']} | {short} | {compiled} | {real / 1e9:.2f} | {est / 1e9:.2f} | "
              f"{error:+.1%} | {real_device / 1e9:.2f} | {est_device / 1e9:.2f} | "
              f"{device_error:+.1%} |")  # fmt: skip
    print()
    print("| set | compiled | what | n | median abs error | worst under | worst over | "
          "within [-2%, +5%] |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for (chosen, compiled, what), values in sorted(errors.items()):
        inside = sum(-0.02 <= e <= 0.05 for e in values)
        print(f"| {chosen} | {compiled} | {what} | {len(values)} | "
              f"{statistics.median(abs(e) for e in values):.1%} | {min(values):+.1%} | "
              f"{max(values):+.1%} | {inside} |")  # fmt: skip


if __name__ == "__main__":
    verb, *args = sys.argv[1:]
    if verb == "run":
        run(args[0], *(int(a) for a in args[1:]))
    elif verb == "run-unseen":
        in_processes(estimate_unseen, unseen(), args[0], int(args[1]) if args[1:] else 12)
    elif verb == "table-unseen":
        table_unseen(args[0])
    else:
        table(args[0])
