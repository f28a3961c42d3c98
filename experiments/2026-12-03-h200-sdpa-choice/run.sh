#!/usr/bin/env bash
# On the H200: the kernel choice probe, then the Llama workload measured by `advisor run` in the
# precisions whose estimates issue 27 found apart (tf32 b8: -37.4%; bf16 b16: -0.5%). Then
# the GPU tests. From the repository root:
#   bash experiments/2026-12-03-h200-sdpa-choice/run.sh OUT
set -u
out=$1
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 experiments/2026-12-03-h200-sdpa-choice/probe.py cuda > "$out/probe-cuda.jsonl" 2> "$out/probe.err"
db="sqlite:///$out/llama.sqlite"
w=experiments/2026-12-03-h200-sdpa-choice/llama.py:workload
for setting in "precision=tf32 batch_size=8" "precision=bf16 batch_size=16"; do
  name=$(echo "$setting" | tr ' =' '_-')
  timeout 150 python3 -m advisor run workload=$w $setting measure.max_timed_s=5 \
    db_url=$db --json > "$out/run-$name.json" 2>> "$out/run.err"
  echo "$setting rc=$?" >> "$out/runs.txt"
done
python3 - "$out" <<'PY'
import sqlite3, sys
src = sqlite3.connect(f"{sys.argv[1]}/llama.sqlite"); dst = sqlite3.connect(f"{sys.argv[1]}/llama-copy.sqlite")
src.backup(dst); dst.close(); src.close()
PY
rm -f "$out/llama.sqlite" "$out"/llama.sqlite-*
timeout 280 python3 -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider > "$out/gpu-tests.txt" 2>&1
echo "gpu tests rc=$?" >> "$out/gpu-tests.txt"
