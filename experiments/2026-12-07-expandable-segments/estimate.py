"""The uncalibrated peak allocated and device peak of each spec of specs.txt (expandable
segments on), on the H100 and the H200 (the fake step is one; the cards' contexts differ),
without the largest batch the public estimate also searches for. Internal API (the fake step
and the uncalibrated corrections, as estimator.estimate uses them), as
../2026-12-06-compiled-device-peak/quick.py; then each against its measurement.

    python estimate.py run OUT.jsonl [PROCESSES]
    python estimate.py table OUT.jsonl RUNS_DIR > table.md   # RUNS_DIR: measure.sh's runs/

Run with the truth's libraries (torch 2.11)."""

from __future__ import annotations

import json
import multiprocessing
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = HERE.parent / "2026-12-03-h200-unseen-models"
CARDS = {"h100_80gb": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200"}


def specs() -> list[tuple[str, str, list[str]]]:
    """(run name as measure.sh names it, workload, settings) of each spec line."""
    rows = []
    for line in (HERE / "specs.txt").read_text().splitlines():
        if line[:2] in ("a ", "b "):
            _, name, folder, *settings = line.split()
            run = "_".join([name, *settings]).replace("=", "-")
            rows.append((run, f"{MODELS / folder / name}.py:workload", settings))
    return rows


def figures(spec: tuple[str, str, list[str]]) -> dict:
    from advisor.config import trial_spec
    from advisor.estimation.corrections import Corrections
    from advisor.estimation.fake_step import fake_step
    from advisor.verbs import configure

    run, workload, settings = spec
    row: dict = {"run": run}
    step = None
    for card in CARDS:
        trial = trial_spec(configure(workload, ["device=cuda", *settings, f"gpu={card}"]))
        step = step or fake_step(trial)
        corrections = Corrections.of(trial, [])
        row[card] = {
            "peak_allocated_bytes": int(
                corrections.allocated(step.peak_allocated_bytes, trial.batch_size)
            ),
            "device_peak_bytes": corrections.steady_reserved(trial, step) + corrections.context,
        }
    return row


def run(out: str, processes: str = "1") -> None:
    context = multiprocessing.get_context("spawn")
    with context.Pool(int(processes), maxtasksperchild=1) as pool, open(out, "w") as sink:
        for row in pool.imap_unordered(figures, specs()):
            print(json.dumps(row), file=sink, flush=True)


def table(path: str, runs: str) -> None:
    estimates = {
        json.loads(line)["run"]: json.loads(line) for line in Path(path).read_text().splitlines()
    }
    print(
        "| spec | card | measured GB | estimate GB | error | device measured | device estimate | error |"
    )
    print("|---|---|---|---|---|---|---|---|")
    errors: list[tuple[float, float]] = []
    for name, _, _ in specs():
        result_path = Path(runs) / f"{name}.json"
        text = result_path.read_text() if result_path.is_file() else ""
        result = json.loads(text) if text.strip() else {}
        if result.get("status") != "ok":
            print(f"| {name} | | not measured: {result.get('status', 'no result')} | | | | | |")
            continue
        m = result["memory"]
        card = next(
            c for c, gpu in CARDS.items() if result["environment"]["device_name"].startswith(gpu)
        )
        said = estimates[name][card]
        real, device = (
            m["steady_peak_allocated_bytes"],
            m["steady_peak_reserved_bytes"] + m["context_bytes"],
        )
        errors.append(
            (said["peak_allocated_bytes"] / real - 1, said["device_peak_bytes"] / device - 1)
        )
        print(
            f"| {name} | {card} | {real / 1e9:.2f} | {said['peak_allocated_bytes'] / 1e9:.2f} | "
            f"{errors[-1][0]:+.1%} | {device / 1e9:.2f} | {said['device_peak_bytes'] / 1e9:.2f} | "
            f"{errors[-1][1]:+.1%} |"
        )
    for i, label in enumerate(("peak allocated", "device peak")):
        e = [x[i] for x in errors]
        if e:
            print(
                f"\n{label}: {len(e)} specs, median |error| {statistics.median(abs(x) for x in e):.1%}, "
                f"worst under {min(e):+.1%}, worst over {max(e):+.1%}, within [-2%, +5%]: "
                f"{sum(-0.02 <= x <= 0.05 for x in e)}"
            )


if __name__ == "__main__":
    verb, *args = sys.argv[1:]
    {"run": run, "table": table}[verb](*args)
