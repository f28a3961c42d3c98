#!/usr/bin/env bash
# One device call: the layer survey (survey.py) and the checking set's runs (measure.sh) side by
# side on the GPU; meanwhile on the machine's CPU (torch 2.11, the truth's) the checking set's
# estimates by the code copied into build/after (carried):
#   mkdir -p build/after && cp -r advisor conf db build/after
#   bash experiments/2026-12-06-conv-workspace-survey/device.sh OUT
set -u
out=$1
here=experiments/2026-12-06-conv-workspace-survey
mkdir -p "$out/estimates"
ESTIMATE_GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && echo h200 || echo h100_80gb)
export ESTIMATE_GPU
for i in 0 1 2 3; do
  ( OMP_NUM_THREADS=1 ESTIMATE_SHARD=$i/4 PYTHONPATH="$PWD/build/after:/tmp/site" timeout 400 \
      python3 "$here/estimate.py" run "$out/estimates/before-$i.jsonl" > "$out/estimates/before-$i.log" 2>&1 ) &
done
( cd "$here" && PYTHONUNBUFFERED=1 timeout 500 python3 survey.py "$out/survey.jsonl" 460 > "$out/survey.log" 2>&1 ) &
bash "$here/measure.sh" "$out" 330
wait
cat "$out"/estimates/before-*.jsonl > "$out/estimates/before.jsonl"
gzip -f "$out/survey.jsonl"
tar -C "$out" -cf "$out/estimates.tar" estimates && rm -rf "$out/estimates"
ls -la "$out"
