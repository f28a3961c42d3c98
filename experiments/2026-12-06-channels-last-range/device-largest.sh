#!/usr/bin/env bash
# One device call: this folder's estimates again with the code in build/after (the range that
# picked_by_cudnn scopes), on the machine's CPU (torch 2.11), then the largest batch within
# 16 GiB of four specs, estimated (largest.py estimate) and bisected on the GPU, four lanes.
#   mkdir -p build/after && cp -r advisor conf db build/after
#   bash experiments/2026-12-06-channels-last-range/device-largest.sh OUT
set -u
out=$1
here=experiments/2026-12-06-channels-last-range
export PYTHONPATH="$PWD/build/after:/tmp/site" OMP_NUM_THREADS=1 ESTIMATE_GPU=h100_80gb
mkdir -p "$out/largest"
for i in 0 1 2 3; do
  ( python3 "$here/largest.py" estimate "$out/largest/estimates-$i.jsonl" $i > "$out/largest/estimate-$i.log" 2>&1
    python3 "$here/largest.py" bisect $i "$out/largest/estimates-$i.jsonl" "$out/largest/bisect-$i.jsonl" 330 > "$out/largest/bisect-$i.log" 2>&1 ) &
done
for i in 0 1 2 3; do
  ( ESTIMATE_SHARD=$i/4 timeout 300 python3 "$here/estimate.py" run "$out/largest/after-$i.jsonl" > "$out/largest/after-$i.log" 2>&1 ) &
done
wait
tar -C "$out" -cf "$out/largest.tar" largest && rm -rf "$out/largest"
