#!/usr/bin/env bash
# The device call: inductor's wrapper code and the allocator's history of the same run, for
# the compiled held-out specs whose device peak the estimate misses, four at a time. Run from
# the repository root by the device tool:
#   bash experiments/2026-12-07-inductor-code/device.sh
set -uo pipefail
here=experiments/2026-12-07-inductor-code
out=${OUT:-/tmp/out}/code
work=/tmp/inductor-code
mkdir -p "$out" "$work"
export TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 PYTHONUNBUFFERED=1
{ python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, torch.cuda.get_device_name())'
  nproc; } > "$out/versions.txt" 2>&1
printf '%s\n' ${SPECS:-unet_ddpm swin_t whisper_base clip_vit_b32 efficientnet_b0 phi3_style} |
  timeout ${LIMIT:-420} xargs -P 4 -I{} bash -c 'TORCHINDUCTOR_CACHE_DIR='"$work"'/{} python3 '"$here"'/code.py {} '"$out"' > '"$out"'/{}.log 2>&1; echo {} exit $? >> '"$out"'/exits.txt'
ls -laR "$out" > "${OUT:-/tmp/out}/listing.txt"
tar -C "$out" -czf "${OUT:-/tmp/out}/code.tar.gz" . && rm -rf "$out"
