#!/usr/bin/env bash
# One device call: measure.sh on the GPU; meanwhile on the machine's CPU (torch 2.11, the
# truth's) the estimates of the same specs, by the code copied into build/after (carried; for
# raw/estimates/, c77b43d's, before has_unmodelled_convolutions: its range then 26%):
#   mkdir -p build/after && cp -r advisor conf db build/after
#   bash experiments/2026-12-06-channels-last-range/device.sh OUT
set -u
out=$1
here=experiments/2026-12-06-channels-last-range
mkdir -p "$out/estimates"
ESTIMATE_GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && echo h200 || echo h100_80gb)
export ESTIMATE_GPU
for i in 0 1 2 3; do
  ( OMP_NUM_THREADS=1 ESTIMATE_SHARD=$i/4 PYTHONPATH="$PWD/build/after:/tmp/site" timeout 400 \
      python3 "$here/estimate.py" run "$out/estimates/after-$i.jsonl" > "$out/estimates/after-$i.log" 2>&1 ) &
done
bash "$here/measure.sh" "$out" 330
wait
cat "$out"/estimates/after-*.jsonl > "$out/estimates/estimates.jsonl"
tar -C "$out" -cf "$out/estimates.tar" estimates && rm -rf "$out/estimates"
ls -la "$out"
