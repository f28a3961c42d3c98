#!/usr/bin/env bash
# One device call: the third set measured on the GPU (measure.sh, two lanes), while the
# estimates of every set run on the machine's CPU with its torch, before (build/before: the code
# of 92cbf16) and after (build/after: this folder's commit) the change, 7 processes each; then
# compile_probe.py's DDP modes on the GPU (issue 28: is the compiled rank's rate lost after a
# step under a dispatch mode, on this torch?). Everything into OUT/*.tar.
#   bash experiments/2026-12-05-cuda-dropout/device.sh OUT
set -u
out=$1
here=experiments/2026-12-05-cuda-dropout
mkdir -p "$out/estimates"
start=$SECONDS
for code in before after; do
  for i in 0 1 2 3 4 5 6; do
    ( ESTIMATE_SHARD=$i/7 PYTHONPATH="$PWD/build/$code:/tmp/site" timeout 420 \
        python3 "$here/estimate.py" run "$out/estimates/$code-$i.jsonl" \
        > "$out/estimates/$code-$i.log" 2>&1 ) &
  done
done
bash "$here/measure.sh" "$out" 180
echo "third set measured at $((SECONDS - start)) s"
for mode in eager ddp8 ddp8_compile ddp8_compile_mode_step; do
  [ $((SECONDS - start)) -lt 330 ] || { echo "$mode: not started (time)"; continue; }
  timeout 90 python3 experiments/2026-12-05-h200-ranks/compile_probe.py "$out/estimates/compile.jsonl" "$mode" >> "$out/estimates/compile.log" 2>&1
  echo "$mode rc=$? at $((SECONDS - start)) s"
done
wait
echo "estimates done at $((SECONDS - start)) s"
cat "$out"/estimates/before-*.jsonl > "$out/estimates/before.jsonl"
cat "$out"/estimates/after-*.jsonl > "$out/estimates/after.jsonl"
wc -l "$out/estimates/before.jsonl" "$out/estimates/after.jsonl"
tar -C "$out" -cf "$out/estimates.tar" estimates && rm -rf "$out/estimates"
