#!/usr/bin/env bash
# The device call: the whole allocator history of seven compiled held-out specs whose device
# peak the estimate misses, four at a time (each snapshot a file of its own: each comes back
# only under 16 MiB). Run from the repository root by the device tool:
#   bash experiments/2026-12-06-compiled-device-peak/device.sh
set -uo pipefail
here=experiments/2026-12-06-compiled-device-peak
out=${OUT:-/tmp/out}/history
mkdir -p "$out"
export TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 PYTHONUNBUFFERED=1
{ python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, torch.cuda.get_device_name())'
  nproc; } > "$out/versions.txt" 2>&1
printf '%s\n' resnet50d swin_t efficientnet_b0 clip_vit_b32 unet_ddpm whisper_base t5_small |
  timeout 500 xargs -P 4 -I{} bash -c 'python3 '"$here"'/history.py {} '"$out"' '"${OUT:-/tmp/out}"' > '"$out"'/{}.log 2>&1; echo {} exit $? >> '"$out"'/exits.txt'
# a snapshot over the limit loses its stacks but the innermost few frames
python3 - "${OUT:-/tmp/out}" <<'PY'
import gzip, pickle, sys
from pathlib import Path
for path in Path(sys.argv[1]).glob("*-history.pickle.gz"):
    if path.stat().st_size > 15 * 2**20:
        snapshot = pickle.load(gzip.open(path))
        for trace in snapshot["device_traces"]:
            for event in trace:
                event["frames"] = event.get("frames", [])[:4]
        for segment in snapshot["segments"]:
            for block in segment["blocks"]:
                block["frames"] = block.get("frames", [])[:4]
        with gzip.open(path, "wb") as file:
            pickle.dump(snapshot, file)
PY
ls -la "$out" "${OUT:-/tmp/out}" > "$out/listing.txt"
tar -C "$out" -cf "${OUT:-/tmp/out}/history.tar" . && rm -rf "$out"
