"""The gpt2 reference grid so far, from every chunk's database, through `advisor history --json`;
and the sweep's trials (raw/sweep-*):

python3 analyze.py raw > summary.txt
"""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ANSWER = "b32 bf16 adamw_fused compile"  # what the sweep recommended (raw/sweep-1)


def history(database: Path) -> list[dict]:
    """The database's trials, read from a copy (opening a database upgrades its schema, and
    the evidence stays as the device wrote it)."""
    with tempfile.TemporaryDirectory() as work:
        copy = Path(work) / "copy.sqlite"
        shutil.copy(database, copy)
        done = subprocess.run(
            [sys.executable, "-m", "advisor", "history", "limit=0", f"db_url=sqlite:///{copy}",
             "--json"],
            capture_output=True,
            text=True,
        )  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"{database}: {done.stderr}")
    return sorted(json.loads(done.stdout), key=lambda r: r["id"])


def setting(s: dict) -> str:
    knobs = [f"b{s['batch_size']}", s["precision"], s["optimizer"]]
    knobs += ["compile"] if s["compile"] else []
    knobs += [f"ckpt {s['checkpointing']}"] if s["checkpointing"] != "none" else []
    return " ".join(knobs + (["expandable_segments"] if s["expandable_segments"] else []))


def line(chunk: str, r: dict) -> str:
    t, m = r["throughput"], r["memory"]
    rate = f"{t['samples_per_s']:,.1f}" if t else "-"
    ci = f"{t['step_s_ci95'] / t['step_s_median']:.2%}" if t and t.get("step_s_ci95") else "-"
    cut = "cut" if t and t.get("stopped") == "cut" else ""
    peak = f"{m['device_peak_bytes'] / 2**30:.2f}" if m else "-"
    return f"{chunk:8} {r['status']:7} {setting(r['spec']):40} {rate:>8} {ci:>6} {cut:>4} {peak:>9}"


raw = Path(sys.argv[1])
header = f"{'chunk':8} {'status':7} {'setting':40} {'rate/s':>8} {'±':>6} {'':>4} {'peak GiB':>9}"
for sweep in sorted(raw.glob("sweep-*")):
    print(f"{sweep.name}: `advisor sweep model=gpt2 gpu.memory=40GiB`, trials in order")
    print((sweep / "sweep.time").read_text().strip())
    print(header)
    for r in history(sweep / "advisor.sqlite"):
        print(line(sweep.name, r))
    print()
rows = [(d.name, r) for d in sorted(raw.glob("chunk-*")) for r in history(d / "grid-copy.sqlite")]
grid = {setting(r["spec"]) for _, r in rows if r["spec"]["batch_size"] != 64}
print(f"grid: {len(grid)} of 48 specs measured ({len(rows)} measurements, b64 beyond the grid)")
print(header)
for chunk, r in rows:
    print(line(chunk, r))
ok = [r for _, r in rows if r["status"] == "ok" and r["throughput"]]
if ok:
    best = max(ok, key=lambda r: r["throughput"]["samples_per_s"])
    print(f"fastest: {setting(best['spec'])}, {best['throughput']['samples_per_s']:,.1f}/s")
# Compiled rates move by a few percent between machines, so each spec is held against the
# sweep's answer measured on its own machine (chunk).
print(f"\nagainst the sweep's answer ({ANSWER}) on the same machine:")
for chunk in dict.fromkeys(c for c, _ in rows):
    mine = [r for c, r in rows if c == chunk and r["status"] == "ok" and r["throughput"]]
    answer = [r for r in mine if setting(r["spec"]) == ANSWER]
    if not answer:
        continue
    rate = answer[0]["throughput"]["samples_per_s"]
    others = sorted(((r["throughput"]["samples_per_s"] / rate - 1, setting(r["spec"]))
                     for r in mine if r is not answer[0]), reverse=True)  # fmt: skip
    best = ", ".join(f"{name} {gap:+.1%}" for gap, name in others[:3]) or "none other"
    print(f"  {chunk}: answer {rate:,.1f}/s; fastest others: {best}")
