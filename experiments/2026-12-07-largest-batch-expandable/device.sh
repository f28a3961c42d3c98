#!/usr/bin/env bash
# One device call: the largest batch within 14 GiB of four specs with expandable segments,
# estimated on the machine's CPU (largest.py estimate, torch 2.11) and bisected on the GPU,
# four lanes at once, each bisection stopped after DEADLINE_S.
#   bash experiments/2026-12-07-largest-batch-expandable/device.sh OUT [DEADLINE_S]
set -u
out=$1 deadline=${2:-220}
here=experiments/2026-12-07-largest-batch-expandable
export OMP_NUM_THREADS=2
mkdir -p "$out/largest"
for i in 0 1 2 3; do
  ( python3 "$here/largest.py" estimate "$out/largest/estimates-$i.jsonl" $i > "$out/largest/estimate-$i.log" 2>&1
    python3 "$here/largest.py" bisect $i "$out/largest/estimates-$i.jsonl" "$out/largest/bisect-$i.jsonl" "$deadline" > "$out/largest/bisect-$i.log" 2>&1 ) &
done
wait
tar -C "$out" -cf "$out/largest.tar" largest && rm -rf "$out/largest"
