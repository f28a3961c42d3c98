#!/usr/bin/env bash
# After the code moved into concept folders (issue 26): the GPU tests, and the gpt2 sweep's
# answer (spec 0 of experiments/2026-12-01-h200-gpt2-grid: b32 bf16 fused AdamW compiled) and
# spec 16 (b16, the same) measured again by `advisor run` under the sweep's cap, to hold against
# the figures measured before the move. From the repository root, on the H200:
#   bash experiments/2026-12-03-h200-after-the-move/run.sh OUT
set -u
out=$1
mkdir -p "$out"
nvidia-smi --query-gpu=name,uuid,driver_version,memory.total --format=csv > "$out/gpu.txt"
PYTHONUNBUFFERED=1 timeout 330 python3 -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider \
  > "$out/gpu-tests.txt" 2>&1
echo "gpu tests rc=$?" >> "$out/gpu-tests.txt"
SPECS="0 16" bash experiments/2026-12-01-h200-gpt2-grid/grid.sh "$out/grid" 220 260
