#!/usr/bin/env bash
# The 12 compiled specs of ../2026-12-03-h200-compile-unseen estimated again with the code as it
# is, on the device machine's CPU (the GPU unused), so that the estimate's torch and inductor are
# the ones the truth was measured with (torch 2.11). Public API, through
# ../2026-12-03-compiled-estimate-same-torch/estimate.py (one fresh process per estimate, a fresh
# SQLite database each: nothing calibrated). Run from the repository root by the device tool:
#   bash experiments/2026-12-06-compiled-unseen-recheck/device.sh
set -uo pipefail
here=experiments/2026-12-06-compiled-unseen-recheck
out=${OUT:-/tmp/out}/recheck
mkdir -p "$out"
{ python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
  git log -1 --format='advisor %h' 2>/dev/null || true
  nproc; } > "$out/versions.txt" 2>&1
timeout 520 python3 experiments/2026-12-03-compiled-estimate-same-torch/estimate.py run-unseen \
  "$out/unseen.jsonl" 12 > "$out/log.txt" 2>&1
echo "exit $?" >> "$out/log.txt"
tar -C "$out" -cf "${OUT:-/tmp/out}/recheck.tar" .
