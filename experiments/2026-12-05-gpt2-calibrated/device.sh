#!/usr/bin/env bash
# One device call: calibrated.py on the machine's CPU (its torch and transformers: the gpt2
# grid's), 12 processes a phase; meanwhile, on its GPU, ../2026-12-05-job-sweep-estimate's
# sweep. Into OUT/calibrated.tar and OUT/sweep.tar.
#   bash experiments/2026-12-05-gpt2-calibrated/device.sh OUT
set -u
out=$1
here=experiments/2026-12-05-gpt2-calibrated
mkdir -p "$out/calibrated"
start=$SECONDS
bash experiments/2026-12-05-job-sweep-estimate/sweep.sh "$out" &
for phase in raw calibrated; do
  for i in $(seq 0 11); do
    ( ESTIMATE_SHARD=$i/12 timeout 270 python3 "$here/calibrated.py" "$phase" "$out/calibrated" \
        > "$out/calibrated/$phase-$i.log" 2>&1 ) &
  done
  wait $(jobs -p | tail -12)
  echo "$phase done at $((SECONDS - start)) s"
done
python3 "$here/calibrated.py" table "$out/calibrated" > "$out/calibrated/table.md"
tail -6 "$out/calibrated/table.md"
wait
echo "all done at $((SECONDS - start)) s"
tar -C "$out" -cf "$out/calibrated.tar" calibrated && rm -rf "$out/calibrated"
