#!/usr/bin/env bash
# One device call: measure.sh on the GPU; meanwhile on the machine's CPU (torch 2.11, the truth's)
# this folder's estimates before (build/before) and after (build/after) the 2-d rule.
#   bash experiments/2026-12-06-cudnn-2d-workspaces/device.sh OUT
# The two copies of the code, made here first and carried with .whl (carry: build, .whl):
#   mkdir -p build/before build/after
#   git archive 991ee2d advisor conf db | tar -x -C build/before   # the last stop, before it
#   cp -r advisor conf db build/after                              # the working tree
set -u
out=$1
here=experiments/2026-12-06-cudnn-2d-workspaces
mkdir -p "$out/estimates"
# the estimates are for the card the truth is measured on
ESTIMATE_GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && echo h200 || echo h100_80gb)
export ESTIMATE_GPU
for code in before after; do
  for i in 0 1 2; do
    ( OMP_NUM_THREADS=1 ESTIMATE_SHARD=$i/3 PYTHONPATH="$PWD/build/$code:/tmp/site" timeout 400 \
        python3 "$here/estimate.py" run "$out/estimates/$code-$i.jsonl" > "$out/estimates/$code-$i.log" 2>&1 ) &
  done
done
bash "$here/measure.sh" "$out" 300
wait
cat "$out"/estimates/before-*.jsonl > "$out/estimates/before.jsonl"
cat "$out"/estimates/after-*.jsonl > "$out/estimates/after.jsonl"
tar -C "$out" -cf "$out/estimates.tar" estimates && rm -rf "$out/estimates"
ls -la "$out"
