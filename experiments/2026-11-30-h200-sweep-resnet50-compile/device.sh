#!/bin/bash
# One device command on a 2-GPU host: both lanes of bench.py, then, on a lane whose grid work is
# done and while time is left, its half of ../2026-11-30-h200-reserve/probe.py, and on lane 1
# the gpu-marked tests. Rerun it to go on; WORK keeps the state while the machine stays warm.
#   bash device.sh WORK DEADLINE_S OUT
WORK=$1 DEADLINE=$2 OUT=$3
HERE=experiments/2026-11-30-h200-sweep-resnet50-compile
mkdir -p "$WORK"
export PYTHONUNBUFFERED=1

lane() {
  local n=$1
  CUDA_VISIBLE_DEVICES=$n python3 $HERE/bench.py "$WORK" "$n" "$DEADLINE" >>"$WORK/lane$n.log" 2>&1
  grep -q "lane $n: grid work done" "$WORK/lane$n.log" || return
  if [ ! -e "$WORK/probe-$n.done" ] && [ $SECONDS -lt $((DEADLINE - 150)) ]; then
    CUDA_VISIBLE_DEVICES=$n python3 experiments/2026-11-30-h200-reserve/probe.py \
      "$WORK/reserve.jsonl" "$n" 2 >>"$WORK/probe-$n.log" 2>&1 && touch "$WORK/probe-$n.done"
  fi
  if [ "$n" = 1 ] && [ ! -e "$WORK/gputests.txt" ] && [ $SECONDS -lt $((DEADLINE - 60)) ]; then
    CUDA_VISIBLE_DEVICES=1 python3 -m pytest -q -m gpu tests >"$WORK/gputests.tmp" 2>&1
    mv "$WORK/gputests.tmp" "$WORK/gputests.txt"
  fi
}

nvidia-smi >"$WORK/nvidia-smi.txt" 2>&1
lane 0 &
lane 1 &
wait
tail -n 5 "$WORK"/lane*.log "$WORK"/probe-*.log "$WORK"/gputests.txt 2>/dev/null
tar -czf "$OUT/work.tgz" -C "$WORK" --exclude='inductor-*' --exclude=claims .
