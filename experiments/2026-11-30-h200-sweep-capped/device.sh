#!/bin/bash
# One device command on a 2-GPU host: on each lane the sweep its PART names (none: no sweep;
# skipped when done), then grid work; then, on lane 1 with time left, the gpu-marked tests. No
# grid trial starts after SECONDS_LEFT from now. Rerun it to go on; WORK keeps the state while
# the machine stays warm. The device command then packs WORK (less the compile caches) into $OUT.
#   bash device.sh WORK PART0 PART1 SECONDS_LEFT
WORK=$1 PART0=$2 PART1=$3 LEFT=$4
[ -n "$LEFT" ] || { echo "usage: device.sh WORK PART0 PART1 SECONDS_LEFT" >&2; exit 2; }
HERE=experiments/2026-11-30-h200-sweep-capped
DEADLINE=$(($(date +%s) + LEFT))
mkdir -p "$WORK"
export PYTHONUNBUFFERED=1
nvidia-smi >"$WORK/nvidia-smi.txt" 2>&1

lane() {
  local n=$1 part=$2
  [ "$part" != none ] && CUDA_VISIBLE_DEVICES=$n python3 $HERE/bench.py "$WORK" "$n" "$part" \
    >>"$WORK/lane$n.log" 2>&1
  CUDA_VISIBLE_DEVICES=$n python3 $HERE/bench.py "$WORK" "$n" grid "$DEADLINE" \
    >>"$WORK/lane$n.log" 2>&1
  if [ "$n" = 1 ] && grep -q "grid work done" "$WORK/lane1.log" && [ ! -e "$WORK/gputests.txt" ] \
    && [ "$(date +%s)" -lt $((DEADLINE + 60)) ]; then
    CUDA_VISIBLE_DEVICES=1 python3 -m pytest -q -m gpu tests >"$WORK/gputests.tmp" 2>&1
    mv "$WORK/gputests.tmp" "$WORK/gputests.txt"
  fi
}
lane 0 "$PART0" &
lane 1 "$PART1" &
wait
tail -n 4 "$WORK"/lane*.log "$WORK"/gputests.txt 2>/dev/null
