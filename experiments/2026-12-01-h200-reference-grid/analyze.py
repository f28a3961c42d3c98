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
print(f"{len(rows)} of 48 specs measured")
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
    print(f"fastest so far: {setting(best['spec'])}, {best['throughput']['samples_per_s']:,.0f}/s")
