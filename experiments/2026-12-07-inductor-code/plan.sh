#!/usr/bin/env bash
# The device call for plan.py: inductor's memory planning of the compiled held-out specs, four
# at a time. Run from the repository root by the device tool:
#   bash experiments/2026-12-07-inductor-code/plan.sh
set -uo pipefail
here=experiments/2026-12-07-inductor-code
out=${OUT:-/tmp/out}/plan
mkdir -p "$out"
export TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 PYTHONUNBUFFERED=1
printf '%s\n' ${SPECS:-unet_ddpm swin_t whisper_base clip_vit_b32 efficientnet_b0 phi3_style t5_small resnet50d} |
  timeout ${LIMIT:-420} xargs -P 4 -I{} bash -c 'python3 '"$here"'/plan.py {} '"$out"' > '"$out"'/{}.log 2>&1; echo {} exit $? >> '"$out"'/exits.txt'
tar -C "$out" -czf "${OUT:-/tmp/out}/plan.tar.gz" . && rm -rf "$out"
