#!/usr/bin/env bash
# One device call: the specs measured on the GPU (measure.sh) while the machine's CPU estimates
# them (estimate.py, torch 2.11, four processes).
#   bash experiments/2026-12-07-expandable-segments/device.sh OUT
set -u
out=$1
here=experiments/2026-12-07-expandable-segments
( OMP_NUM_THREADS=2 TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 python3 "$here/estimate.py" run "$out/estimates.jsonl" 4 > "$out/estimate.log" 2>&1 ) &
bash "$here/measure.sh" "$out" 330
wait
