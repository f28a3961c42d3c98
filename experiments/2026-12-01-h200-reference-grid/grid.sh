#!/usr/bin/env bash
# Issue 13's reference grid for resnet50 on one H200: 48 specs, precision (torch's default,
# bf16, fp16) x channels_last x compile x optimizer (adamw, adamw_fused) x batch (1024, 2048),
# each measured by `advisor run` (the code a sweep's trials run, without the sweep's cut). The
# grid takes more than one device call: from the repository root,
#   bash experiments/2026-12-01-h200-reference-grid/grid.sh OUT FIRST LAST [UNTIL_S]
# measures specs FIRST..LAST (0-47, in the order below) into OUT/grid.sqlite, starting none
# after UNTIL_S seconds (default 520), then packs OUT/grid.tgz. analyze.py reads every chunk.
# SPECS="12 16 17" measures those instead, in that order (FIRST and LAST are then ignored): a
# chunk of compiled specs measures the sweep's answer (12) on its own machine first.
set -u
out=$1; first=$2; last=$3; until_s=${4:-520}
db="sqlite:///$out/grid.sqlite"
export PYTHONUNBUFFERED=1 COLUMNS=160
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt"
specs=()
for batch in 2048 1024; do
  for compile in false true; do
    for precision in bf16 fp16 default; do
      for channels_last in true false; do
        for optimizer in adamw_fused adamw; do
          specs+=("batch_size=$batch precision=$precision channels_last=$channels_last compile=$compile optimizer=$optimizer")
        done
      done
    done
  done
done
for i in ${SPECS:-$(seq "$first" "$last")}; do
  [ $SECONDS -lt "$until_s" ] || { echo "spec $i not started: past ${until_s}s" >> "$out/grid.time"; break; }
  s=$SECONDS
  python3 -m advisor run model=resnet50 ${specs[$i]} db_url=$db --json > "$out/run-$i.json" 2>> "$out/grid.err"
  echo "spec $i rc=$? wall_s=$((SECONDS - s)) ${specs[$i]}" >> "$out/grid.time"
done
python3 - "$out" <<'PY'
import sqlite3, sys
src = sqlite3.connect(f"{sys.argv[1]}/grid.sqlite"); dst = sqlite3.connect(f"{sys.argv[1]}/grid-copy.sqlite")
src.backup(dst); dst.close(); src.close()
PY
tar -C "$out" -czf /tmp/grid.tgz --exclude grid.sqlite --exclude 'grid.sqlite-*' . && mv /tmp/grid.tgz "$out/grid.tgz"
find "$out" -mindepth 1 ! -name grid.tgz -delete
