#!/usr/bin/env bash
# The calibrated phase again after 1-trial calibrations keep their replay ratio, on the raw
# phase of device.sh (the uncalibrated estimate does not change): 14 processes on the CPU.
#   bash experiments/2026-12-05-gpt2-calibrated/after.sh OUT
set -u
out=$1
here=experiments/2026-12-05-gpt2-calibrated
mkdir -p "$out/after"
cp "$here"/raw/calibrated/raw-*.jsonl "$out/after/"
start=$SECONDS
for i in $(seq 0 13); do
  ( ESTIMATE_SHARD=$i/14 timeout 330 python3 "$here/calibrated.py" calibrated "$out/after" > "$out/after/calibrated-$i.log" 2>&1 ) &
done
wait
echo "calibrated done at $((SECONDS - start)) s"
python3 "$here/calibrated.py" table "$out/after" > "$out/after/table.md"
tail -6 "$out/after/table.md"
tar -C "$out" -cf "$out/after.tar" after && rm -rf "$out/after"
