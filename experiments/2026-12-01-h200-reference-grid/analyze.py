"""The reference grid so far, from every chunk's database, through `advisor history --json`:

python3 analyze.py raw/chunk-* > summary.txt
"""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def history(folder: Path) -> list[dict]:
    """The chunk's trials, read from a copy (opening a database upgrades its schema, and the
    evidence stays as the device wrote it)."""
    with tempfile.TemporaryDirectory() as work:
        copy = Path(work) / "grid.sqlite"
        shutil.copy(folder / "grid-copy.sqlite", copy)
        done = subprocess.run(
            [sys.executable, "-m", "advisor", "history", "limit=0", f"db_url=sqlite:///{copy}",
             "--json"],
            capture_output=True,
            text=True,
        )  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"{folder}: {done.stderr}")
    return sorted(json.loads(done.stdout), key=lambda r: r["id"])


def setting(s: dict) -> str:
    knobs = [f"b{s['batch_size']}", s["precision"], s["optimizer"]]
    return " ".join(knobs + [k for k in ("channels_last", "compile") if s[k]])


rows = [(folder.name, r) for folder in map(Path, sys.argv[1:]) for r in history(folder)]
specs = {setting(r["spec"]) for _, r in rows}  # the answer (spec 12) is measured in each chunk
print(f"{len(specs)} of 48 specs measured ({len(rows)} measurements)")
print(f"{'chunk':8} {'status':7} {'setting':45} {'rate/s':>8} {'±':>6} {'peak GiB':>9}")
for chunk, r in rows:
    t, m = r["throughput"], r["memory"]
    rate = f"{t['samples_per_s']:,.0f}" if t else "-"
    ci = f"{t['step_s_ci95'] / t['step_s_median']:.2%}" if t and t.get("step_s_ci95") else "-"
    peak = f"{m['device_peak_bytes'] / 2**30:.2f}" if m else "-"
    print(f"{chunk:8} {r['status']:7} {setting(r['spec']):45} {rate:>8} {ci:>6} {peak:>9}")
ok = [r for _, r in rows if r["status"] == "ok" and r["throughput"]]
if ok:
    best = max(ok, key=lambda r: r["throughput"]["samples_per_s"])
    print(
        f"fastest measurement: {setting(best['spec'])}, {best['throughput']['samples_per_s']:,.0f}/s"
    )
# Compiled rates move by a few percent between machines, so each spec is held against the
# sweep's answer measured on its own machine (chunk), where the chunk measured it.
ANSWER = "b2048 bf16 adamw_fused channels_last compile"
print(f"\nagainst the sweep's answer ({ANSWER}) on the same machine:")
for chunk in dict.fromkeys(c for c, _ in rows):
    mine = [r for c, r in rows if c == chunk and r["status"] == "ok" and r["throughput"]]
    answer = [r for r in mine if setting(r["spec"]) == ANSWER]
    if not answer:
        continue
    rate = answer[0]["throughput"]["samples_per_s"]
    others = sorted(((r["throughput"]["samples_per_s"] / rate - 1, setting(r["spec"]))
                     for r in mine if r is not answer[0]), reverse=True)  # fmt: skip
    best = f"{others[0][1]} {others[0][0]:+.1%}" if others else "none other"
    print(f"  {chunk}: answer {rate:,.0f}/s; fastest other {best}")
