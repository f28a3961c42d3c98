#!/usr/bin/env bash
# One device call. On the GPU, measure.sh's memory snapshots (catalog convolutions and the
# held-out UNet). On the machine's CPU meanwhile, with its torch and transformers (the truth's
# versions), the uncalibrated estimate of every spec with a GPU truth
# (../2026-12-05-cuda-dropout/estimate.py: held-out, second and third sets; gpt2 left out for
# time), before (build/before) and after (build/after) this folder's change, 7 processes of one
# thread each.
#   bash experiments/2026-12-05-cudnn-workspaces/device.sh OUT
# The two copies of the code, made here first and carried with .whl (carry: build, .whl):
#   mkdir -p build/before build/after
#   git archive e3c114f advisor conf db | tar -x -C build/before   # the last stop before it
#   git archive HEAD advisor conf db | tar -x -C build/after
set -u
out=$1
here=experiments/2026-12-05-cudnn-workspaces
mkdir -p "$out/estimates"
start=$SECONDS
for code in before after; do
  for i in 0 1 2 3 4 5 6; do
    ( OMP_NUM_THREADS=1 ESTIMATE_SHARD=$i/7 PYTHONPATH="$PWD/build/$code:/tmp/site" timeout 480 \
        python3 experiments/2026-12-05-cuda-dropout/estimate.py run "$out/estimates/$code-$i.jsonl" \
        heldout second third > "$out/estimates/$code-$i.log" 2>&1 ) &
  done
done
bash "$here/measure.sh" "$out" 300
echo "snapshots done at $((SECONDS - start)) s"
wait
echo "estimates done at $((SECONDS - start)) s"
cat "$out"/estimates/before-*.jsonl > "$out/estimates/before.jsonl"
cat "$out"/estimates/after-*.jsonl > "$out/estimates/after.jsonl"
wc -l "$out/estimates/before.jsonl" "$out/estimates/after.jsonl"
tar -C "$out" -cf "$out/estimates.tar" estimates && rm -rf "$out/estimates"
