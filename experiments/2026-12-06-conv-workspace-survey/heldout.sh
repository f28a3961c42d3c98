#!/usr/bin/env bash
# One device call: the held-out, second and third sets (../2026-12-05-cuda-dropout/estimate.py) estimated
# on the machine's CPU (torch 2.11, the truth's), 7 processes each, by the code before (build/before:
# git archive of the last commit) and after this folder's change (build/after: the working tree).
#   bash experiments/2026-12-06-conv-workspace-survey/heldout.sh OUT
set -u
out=$1
here=experiments/2026-12-05-cuda-dropout
mkdir -p "$out/estimates"
for code in before after; do
  for i in 0 1 2 3 4 5 6; do
    ( ESTIMATE_SHARD=$i/7 PYTHONPATH="$PWD/build/$code:/tmp/site" timeout 480 \
        python3 "$here/estimate.py" run "$out/estimates/$code-$i.jsonl" heldout second third \
        > "$out/estimates/$code-$i.log" 2>&1 ) &
  done
done
wait
cat "$out"/estimates/before-*.jsonl > "$out/estimates/before.jsonl"
cat "$out"/estimates/after-*.jsonl > "$out/estimates/after.jsonl"
tar -C "$out" -cf "$out/heldout-estimates.tar" estimates && rm -rf "$out/estimates"
ls -la $out
