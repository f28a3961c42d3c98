#!/usr/bin/env bash
# Issue 13's reference grid for `advisor sweep model=gpt2 gpu.memory=40GiB` on one H200: 48
# specs, batch (32, 16, 8) x compile x precision (bf16, fp16, tf32, torch's default) x optimizer
# (adamw_fused, adamw), each measured by `advisor run` (a sweep trial's code, without the
# sweep's cut) under the cap the sweep's trials run under: 40 GiB less the 5% margin and a CUDA
# context (40003174400 bytes, advisor.target.trial_cap). Specs 48-50 look past the frontier
# the sweep predicts: b64 bf16 and fp16 compiled, and b64 bf16 compiled with checkpointing.
# channels_last is left out: gpt2 has no image input, and the sweep's space has no such axis.
# From the repository root:
#   SPECS="0 1 2" bash experiments/2026-12-01-h200-gpt2-grid/grid.sh OUT [UNTIL_S] [STOP_S]
# measures those specs (in that order) into OUT/grid.sqlite, starting none after UNTIL_S
# seconds of this script (default 520) and stopping the one running at STOP_S (default 585),
# then packs OUT/grid.tgz. Every chunk measures the sweep's answer (spec 0) first: compiled
# rates move by a few percent between machines. analyze.py reads every chunk.
set -u
out=$1; until_s=${2:-520}; stop_s=${3:-585}
mkdir -p "$out"
db="sqlite:///$out/grid.sqlite"
export PYTHONUNBUFFERED=1 COLUMNS=160
nvidia-smi --query-gpu=name,uuid,driver_version,memory.total --format=csv > "$out/gpu.txt"
specs=()
for batch in 32 16 8; do
  for compile in true false; do
    for precision in bf16 fp16 tf32 default; do
      for optimizer in adamw_fused adamw; do
        specs+=("batch_size=$batch compile=$compile precision=$precision optimizer=$optimizer")
      done
    done
  done
done
specs+=(
  "batch_size=64 compile=true precision=bf16 optimizer=adamw_fused"
  "batch_size=64 compile=true precision=fp16 optimizer=adamw_fused"
  "batch_size=64 compile=true precision=bf16 optimizer=adamw_fused checkpointing=blocks"
)
for i in $SPECS; do
  [ $SECONDS -lt "$until_s" ] || { echo "spec $i not started: past ${until_s}s" >> "$out/grid.time"; break; }
  s=$SECONDS
  timeout $((stop_s - SECONDS)) python3 -m advisor run model=gpt2 ${specs[$i]} \
    memory_cap=40003174400 db_url=$db --json > "$out/run-$i.json" 2>> "$out/grid.err"
  echo "spec $i rc=$? wall_s=$((SECONDS - s)) ${specs[$i]}" >> "$out/grid.time"
done
python3 - "$out" <<'PY'
import sqlite3, sys
src = sqlite3.connect(f"{sys.argv[1]}/grid.sqlite"); dst = sqlite3.connect(f"{sys.argv[1]}/grid-copy.sqlite")
src.backup(dst); dst.close(); src.close()
PY
tar -C "$out" -czf /tmp/grid.tgz --exclude grid.sqlite --exclude 'grid.sqlite-*' . && mv /tmp/grid.tgz "$out/grid.tgz"
find "$out" -mindepth 1 ! -name grid.tgz -delete
