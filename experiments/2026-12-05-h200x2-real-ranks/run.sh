#!/bin/bash
# Issue 28 on a host with two H200s (nvidia-h200-x2): for DDP and FSDP2, advisor's rank of the
# job measured on one GPU (its memory measured, its step modelled), then the real job on both
# GPUs under torchrun, from the lines advisor emits, recorded by a TrainingRun; then each real
# run beside its prediction.
#   run.sh OUT [MODEL] [DEVICE]     MODEL: gpt2 (default) or tiny_mlp; DEVICE: cuda or cpu
set -u
OUT=${1:?OUT folder}
MODEL=${2:-gpt2}
DEVICE=${3:-cuda}
HERE=$(cd "$(dirname "$0")" && pwd)
DB="sqlite:///$OUT/real.sqlite"
if [ "$DEVICE" = cuda ]; then
  SETTING="batch_size=8 precision=bf16 optimizer=adamw_fused gpu=h200"; STEPS=150
else
  SETTING="batch_size=16 gpu.memory=64MiB gpu.intra_node_busbw=1"; STEPS=60
fi
for strategy in ddp fsdp; do
  python3 -m advisor run model=$MODEL device=$DEVICE gpus=2 strategy=$strategy \
    $(echo $SETTING | tr ' ' '\n' | grep -v '^gpu\.memory') db_url="$DB" --json \
    > "$OUT/predicted-$strategy.json" 2> "$OUT/predicted-$strategy.err"
  TRIAL=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['id'])" \
    "$OUT/predicted-$strategy.json")
  python3 -m advisor recommend model=$MODEL device=$DEVICE gpus=2 strategy=$strategy \
    $SETTING db_url="$DB" emit=torch > "$OUT/emitted-$strategy.py" 2> "$OUT/emitted-$strategy.err"
  python3 -m torch.distributed.run --standalone --nproc_per_node=2 "$HERE/real.py" \
    "$OUT/emitted-$strategy.py" "$TRIAL" "$DB" $MODEL $STEPS > "$OUT/real-$strategy.log" 2>&1
  echo "$strategy: trial $TRIAL, torchrun exit $?"
done
COLUMNS=120 python3 -m advisor history kind=training gpus=2 db_url="$DB" > "$OUT/runs.txt" 2>&1
python3 "$HERE/summary.py" "$OUT" "$DB" > "$OUT/summary.json" 2> "$OUT/summary.err"
