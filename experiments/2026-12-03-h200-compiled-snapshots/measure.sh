#!/usr/bin/env bash
# On the H200: torch's memory snapshot of compiled specs the estimate misses (gpt2 in bf16,
# resnet50 in bf16, and resnet50 checkpointed), and gpt2's eager twin, each measured by
# `advisor run` in its own lane (a fresh SQLite database each), all four at once.
#   bash experiments/2026-12-03-h200-compiled-snapshots/measure.sh OUT_DIR
set -u
out=${1:?OUT_DIR}
mkdir -p "$out/p"
python3 -c "import torch, torchvision, transformers, sys; print(sys.version.split()[0], torch.__version__, torchvision.__version__, transformers.__version__, torch.cuda.get_device_name())" > "$out/p/versions.txt" 2>&1
lane() {
  local name=$1; shift
  python3 -m advisor run "$@" "db_url=sqlite:///$out/$name.sqlite" \
    "memory_snapshot=$out/p/$name.pickle" --json > "$out/p/$name.json" 2> "$out/p/$name.err"
  echo "$name rc=$?" >> "$out/p/lanes.txt"
}
lane gpt2-bf16-b8-compiled model=gpt2 batch_size=8 precision=bf16 optimizer=adamw compile=true &
lane gpt2-bf16-b8-eager model=gpt2 batch_size=8 precision=bf16 optimizer=adamw compile=false &
lane resnet50-bf16-b256-cl-compiled model=resnet50 batch_size=256 precision=bf16 optimizer=adamw \
  channels_last=true compile=true &
lane resnet50-tf32-b256-cl-ckpt-compiled model=resnet50 batch_size=256 precision=tf32 \
  optimizer=adamw_fused checkpointing=blocks channels_last=true compile=true &
wait
gzip -f "$out"/p/*.pickle
tar -C "$out" -cf "$out/snapshots.tar" p
