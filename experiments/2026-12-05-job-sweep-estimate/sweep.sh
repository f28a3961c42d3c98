#!/usr/bin/env bash
# issue 28: `advisor sweep gpus=8` of gpt2 now that a job's sweep asks the rank's estimate
# (6875d52), timed as a user runs it, on the local GPU's profile; the same command as
# ../2026-12-05-h200-ranks' sweep but gpu=auto (that one ran on an H200 with gpu=h200). Then
# `advisor history gpus=8`. Into OUT/sweep.tar.
#   bash experiments/2026-12-05-job-sweep-estimate/sweep.sh OUT
set -u
out=$1
mkdir -p "$out/sweep"
start=$SECONDS
python3 -m advisor sweep model=gpt2 gpu=auto gpus=8 effective_batch_size=256 minutes=7 emit=torch \
  "db_url=sqlite:////tmp/sweep.sqlite" "study_db_url=sqlite:////tmp/study.sqlite" \
  < /dev/null > "$out/sweep/emitted.txt" 2> "$out/sweep/report.txt"
echo "sweep rc=$? wall $((SECONDS - start)) s" | tee "$out/sweep/runs.txt"
COLUMNS=160 python3 -m advisor history gpus=8 "db_url=sqlite:////tmp/sweep.sqlite" > "$out/sweep/history.txt" 2>&1
python3 - "$out" <<'PY'
import sqlite3, sys
src = sqlite3.connect("/tmp/sweep.sqlite"); dst = sqlite3.connect(f"{sys.argv[1]}/sweep/sweep.sqlite")
src.backup(dst); dst.close(); src.close()
PY
tar -C "$out" -cf "$out/sweep.tar" sweep && rm -rf "$out/sweep"
