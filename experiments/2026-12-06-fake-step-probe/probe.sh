#!/usr/bin/env bash
# Does the fake step run public architectures no set here has tried? Each workload of
# workloads/ (configs shrunk to a few layers: the question is whether the step runs, not its
# size) estimated for an H200 in bf16, bf16 checkpointed and torch's default precision, batch 8,
# by the command a user types, on an empty database. One line per estimate: the peak allocated
# and device peak in GiB and the seconds it took, or the error's last line.
#   bash experiments/2026-12-06-fake-step-probe/probe.sh [WORKLOAD ...] > raw/NAME.txt
set -u
here=$(cd "$(dirname "$0")" && pwd)
db=$(mktemp -d)
models=("$@"); [ $# -gt 0 ] || models=(gemma2 falcon bloom mamba wav2vec2 densenet mobilenet dinov2)
for w in "${models[@]}"; do
  for settings in "precision=bf16" "precision=bf16 checkpointing=blocks" "precision=default"; do
    start=$SECONDS
    # shellcheck disable=SC2086
    if out=$(advisor estimate "workload=$here/workloads/$w.py:workload" $settings batch_size=8 \
        gpu=h200 "db_url=sqlite:///$db/e.sqlite" --json 2> "$db/err"); then
      echo "$w [$settings] ok $((SECONDS - start)) s: $(echo "$out" | python3 -c '
import json, sys
m = json.load(sys.stdin)["memory"]
allocated, device = m["peak_allocated_bytes"] / 2**30, m["device_peak_bytes"] / 2**30
print(f"{allocated:.3f} GiB allocated, {device:.3f} GiB device peak")')"
    else
      echo "$w [$settings] exit $? $((SECONDS - start)) s: $(tail -1 "$db/err")"
    fi
  done
done
rm -rf "$db"
