#!/bin/bash
# One device command on a 2-GPU host: run.py on both lanes until SECONDS_LEFT from now, then
# (lane 1, with time left) the gpu-marked tests.   bash device.sh WORK SECONDS_LEFT
WORK=$1 LEFT=$2
[ -n "$LEFT" ] || { echo "usage: device.sh WORK SECONDS_LEFT" >&2; exit 2; }
HERE=experiments/2026-11-30-h200-accuracy-alone
DEADLINE=$(($(date +%s) + LEFT))
mkdir -p "$WORK"
export PYTHONUNBUFFERED=1
nvidia-smi >"$WORK/nvidia-smi.txt" 2>&1
for n in 0 1; do
  CUDA_VISIBLE_DEVICES=$n python3 $HERE/run.py "$WORK" $n $DEADLINE >"$WORK/lane$n.log" 2>&1 &
done
wait
tail -n 3 "$WORK"/lane*.log
