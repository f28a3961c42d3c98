#!/usr/bin/env bash
# How long `advisor estimate` takes on this machine's CPU for the 0.5B held-out model (issue 27:
# "answers within 20 s on the CPU for a 0.5B model"), end to end as a user runs it: the
# command's start, imports, the model's build, the fake steps and the largest-batch search,
# with an empty database (nothing to calibrate on). Three runs of each setting, one at a time.
#   bash time_estimates.sh > raw/times.txt
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
advisor=${ADVISOR:-$here/../../.venv/bin/advisor}
workload=$here/../2026-12-03-h200-unseen-models/heldout/qwen2_0_5b.py:workload
db=$(mktemp -d)/empty.db
echo "# $(nproc) CPUs; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $(git -C "$here" rev-parse --short HEAD); torch $("${advisor%/advisor}/python" -c 'import torch; print(torch.__version__)')"
for setting in "precision=bf16" "" "precision=bf16 compile=true"; do
  for run in 1 2 3; do
    started=$(date +%s.%N)
    # shellcheck disable=SC2086
    answer=$("$advisor" estimate "workload=$workload" batch_size=8 $setting gpu=h200 \
      "db_url=sqlite:///$db" --json 2>/dev/null)
    took=$(echo "$(date +%s.%N) - $started" | bc)
    echo "$answer" | python3 -c "import json, sys; d = json.load(sys.stdin); print(
      f'${setting:-torch default precision} run $run: {float(\"$took\"):.1f} s; largest batch',
      d['largest_batch'], '; device peak', d['memory']['device_peak_bytes'])"
  done
done
