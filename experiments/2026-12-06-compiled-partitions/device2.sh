#!/usr/bin/env bash
# The second device call: BART's real partitions (the first call's record failed on a symbolic
# size), the UNet's and Whisper's real steps with the allocator's history of their third step,
# (each a file of its own beside the tar: each comes back only under 16 MiB),
# and which attention kernel an eager step of pythia and RoBERTa runs on the GPU. Run from the
# repository root by the device tool:
#   bash experiments/2026-12-06-compiled-partitions/device2.sh
set -uo pipefail
here=experiments/2026-12-06-compiled-partitions
out=${OUT:-/tmp/out}/partitions2
mkdir -p "$out"
export TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 PYTHONUNBUFFERED=1
{ python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, torch.cuda.get_device_name())'
  nproc; } > "$out/versions.txt" 2>&1
printf '%s\n' "real bart_base" "eager pythia_160m" "real unet_ddpm" "real whisper_base" "eager roberta_classifier" |
  timeout 480 xargs -P 3 -I{} bash -c 'set -- {}; case $2 in unet_ddpm|whisper_base) export SNAPSHOT='"${OUT:-/tmp/out}"';; esac
    READABLE=/tmp/graphs-$2 python3 '"$here"'/partitions.py $1 $2 '"$out"'/$2-$1.json > '"$out"'/$2-$1.log 2>&1; echo $2 $1 exit $? >> '"$out"'/exits.txt'
tar -C /tmp/graphs-bart_base -czf "$out/bart-graphs.tgz" . 2>/dev/null
tar -C "$out" -cf "${OUT:-/tmp/out}/partitions2.tar" .
