"""Tables for README.md from what device.sh brought back (raw/sweep and raw/repeat), through
the command line only: `advisor history --json` on the copied databases.

    python3 analyze.py raw/sweep-* raw/repeat-* > summary.txt
"""

import json
import statistics
import subprocess
import sys
from pathlib import Path


def history(folder: Path) -> list[dict]:
    db = f"sqlite:///{(folder / 'advisor.sqlite').resolve()}"
    out = subprocess.run(
        [sys.executable, "-m", "advisor", "history", "limit=0", f"db_url={db}", "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(json.loads(out), key=lambda r: r["id"])


def setting(r: dict) -> str:
    s = r["spec"]
    knobs = [f"b{s['batch_size']}", s["precision"], s["optimizer"]]
    knobs += [k for k in ("channels_last", "compile", "expandable_segments") if s[k]]
    if s["checkpointing"] != "none":
        knobs.append("ckpt")
    return " ".join(knobs)


def sweep(folder: Path) -> None:
    err = folder / "sweep.err"
    what = err.read_text().splitlines()[0] if err.exists() else "advisor sweep"
    print(f"== {folder}: {what} (cold)")
    if not (folder / "advisor.sqlite").exists():
        print("no databases came back: the device's time ran out during the sweep")
        return
    print((folder / "sweep.time").read_text().strip())
    text = (folder / "sweep.json").read_text()
    if not text:
        print("no answer: the command was stopped at its time limit")
    else:
        answer = json.loads(text)
        info = answer["sweep"]
        print(
            f"stop: {info['stop_reason']}; searched {info['elapsed_s']:.0f} s; "
            f"within 2% after {info['time_to_98_s']:.0f} s; workers {info['workers']}"
        )
        best = answer["recommendation"]
        print(
            f"recommended: trial {best['id']} {setting(best)} "
            f"{best['throughput']['samples_per_s']:,.0f}/s"
        )
        rates = [f"{r['throughput']['samples_per_s']:,.0f}" for r in answer["repeats"]]
        print(f"its measurements: {', '.join(rates)}; disagreement {answer['disagreement']:.2%}")
    print(
        f"{'id':>3} {'status':7} {'setting':58} {'rate/s':>8} {'±':>6} {'stop':8} "
        f"{'build':>6} {'first':>6} {'warm':>5} {'time':>5} {'wall':>6}"
    )
    for r in history(folder):
        t = r["throughput"] or {}
        ci = t.get("step_s_ci95")
        precision = f"{ci / t['step_s_median']:.1%}" if ci is not None else "-"

        def s(key: str, t: dict = t) -> str:
            return f"{t[key]:.1f}" if t.get(key) is not None else "-"

        rate = f"{t['samples_per_s']:,.0f}" if t else "-"
        print(
            f"{r['id']:>3} {r['status']:7} {setting(r):58} {rate:>8} {precision:>6} "
            f"{t.get('stopped') or '-':8} {s('setup_s'):>6} {s('first_step_s'):>6} "
            f"{s('warmup_s'):>5} {s('timing_s'):>5} {r['wall_s']:6.1f}"
        )


def repeat(folders: list[Path]) -> None:
    """The runs of several machines (each device call starts a fresh one) side by side."""
    print(f"\n== {', '.join(map(str, folders))}: 5 specs, interleaved rounds")
    groups: dict[str, list[dict]] = {}
    for folder in folders:
        for r in history(folder):
            groups.setdefault(setting(r), []).append(r)
    print(
        f"{'setting':58} {'rates/s':>26} {'spread':>7} {'steady peak reserved GiB':>26} "
        f"{'spread':>7}"
    )
    for name, runs in groups.items():
        rates = [r["throughput"]["samples_per_s"] for r in runs if r["throughput"]]
        peaks = [r["memory"]["steady_peak_reserved_bytes"] / 2**30 for r in runs if r["memory"]]
        rate_spread = (max(rates) - min(rates)) / statistics.median(rates)
        peak_spread = (max(peaks) - min(peaks)) / statistics.median(peaks)
        print(
            f"{name:58} {', '.join(f'{x:,.0f}' for x in rates):>26} {rate_spread:7.2%} "
            f"{', '.join(f'{x:.2f}' for x in peaks):>26} {peak_spread:7.2%}"
        )


if __name__ == "__main__":
    folders = [Path(arg) for arg in sys.argv[1:]]
    for folder in folders:
        if (folder / "sweep.json").exists():
            sweep(folder)
    repeats = [folder for folder in folders if not (folder / "sweep.json").exists()]
    if repeats:
        repeat(repeats)
