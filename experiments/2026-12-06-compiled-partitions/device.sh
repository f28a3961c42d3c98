#!/usr/bin/env bash
# The real side of partitions.py for the seven compiled held-out specs still outside the target
# (../2026-12-06-compiled-unseen-recheck), three at a time on one GPU (their peaks together stay
# under 70 GB; each process's allocator is its own), inductor's caches off so that each compile
# runs its partitioner. The graphs' code is kept. Run from the repository root by the device tool:
#   bash experiments/2026-12-06-compiled-partitions/device.sh
set -uo pipefail
here=experiments/2026-12-06-compiled-partitions
out=${OUT:-/tmp/out}/partitions
mkdir -p "$out/graphs"
export TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 READABLE="$out/graphs" PYTHONUNBUFFERED=1
{ python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, torch.cuda.get_device_name())'
  nproc; } > "$out/versions.txt" 2>&1
printf '%s\n' bart_base pythia_160m whisper_base swin_t unet_ddpm resnet50d efficientnet_b0 |
  timeout 500 xargs -P 3 -I{} bash -c \
    "python3 $here/partitions.py real {} $out/{}-real.json > $out/{}.log 2>&1; echo {} exit \$? >> $out/exits.txt"
tar -C "$out/graphs" -czf "$out/graphs.tgz" . && rm -rf "$out/graphs"
tar -C "$out" -cf "${OUT:-/tmp/out}/partitions.tar" .
