#!/usr/bin/env bash
# One device call. On the machine's CPU, with its torch and transformers (the truth's
# versions), the uncalibrated estimate of every spec with a GPU truth (../2026-12-05-cuda-
# dropout/estimate.py), before (build/before: c50b60f) and after (build/after: f112299, ties
# between equal free blocks broken newest segment first), 5 processes each. On the GPU
# meanwhile, issue 28's 1.1B Llama ranks compiled and eager (llama_ranks.sh), each beside its
# rank estimate. Everything into OUT/*.tar.
#   bash experiments/2026-12-05-allocator-ties/device.sh OUT
set -u
out=$1
here=experiments/2026-12-05-allocator-ties
mkdir -p "$out/estimates"
start=$SECONDS
for code in before after; do
  for i in 0 1 2 3 4; do
    ( ESTIMATE_SHARD=$i/5 PYTHONPATH="$PWD/build/$code:/tmp/site" timeout 540 \
        python3 experiments/2026-12-05-cuda-dropout/estimate.py run "$out/estimates/$code-$i.jsonl" \
        > "$out/estimates/$code-$i.log" 2>&1 ) &
  done
done
[ "${RANKS:-1}" = 1 ] && bash "$here/llama_ranks.sh" "$out" 420
[ "${SNAPSHOTS:-0}" = 1 ] && bash "$here/snapshots.sh" "$out"
echo "ranks done at $((SECONDS - start)) s"
wait
echo "estimates done at $((SECONDS - start)) s"
cat "$out"/estimates/before-*.jsonl > "$out/estimates/before.jsonl"
cat "$out"/estimates/after-*.jsonl > "$out/estimates/after.jsonl"
wc -l "$out/estimates/before.jsonl" "$out/estimates/after.jsonl"
tar -C "$out" -cf "$out/estimates.tar" estimates && rm -rf "$out/estimates"
