#!/usr/bin/env bash
# On the H200: `advisor run` of the specs.txt lines FIRST..LAST (counting only spec lines), each
# alone, into OUT/runs/NAME.json (the name compare.py reads), the database copied with sqlite3's
# backup API; no new run starts after BUDGET_S seconds (a device call is 10 minutes at most).
#   bash experiments/2026-12-03-h200-unseen-models/measure.sh OUT FIRST LAST [BUDGET_S]
set -u
out=$1 first=$2 last=$3 budget=${4:-500}
here=experiments/2026-12-03-h200-unseen-models
mkdir -p "$out/runs"
export PYTHONUNBUFFERED=1
python3 -c "import torch, transformers, timm, diffusers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'timm', timm.__version__, 'diffusers', diffusers.__version__, torch.cuda.get_device_name())" > "$out/versions.txt" 2>&1
start=$SECONDS n=0
grep -E '^(heldout|second) ' "$here/specs.txt" | while read -r set name settings; do
  n=$((n + 1))
  [ "$n" -lt "$first" ] || [ "$n" -gt "$last" ] && continue
  if [ $((SECONDS - start)) -gt "$budget" ]; then echo "$n $name $settings: not started (budget)" >> "$out/runs.txt"; continue; fi
  run=$(echo "${name} ${settings}" | tr ' =' '_-')
  t0=$SECONDS
  # shellcheck disable=SC2086
  timeout 200 python3 -m advisor run "workload=$here/$set/$name.py:workload" $settings \
    measure.min_timed_steps=3 measure.max_timed_s=2 "db_url=sqlite:///$out/truth.sqlite" --json \
    < /dev/null > "$out/runs/$run.json" 2>> "$out/run.err"
  echo "$n $run rc=$? $((SECONDS - t0))s" >> "$out/runs.txt"
done
python3 - "$out" <<'PY'
import sqlite3, sys
src = sqlite3.connect(f"{sys.argv[1]}/truth.sqlite"); dst = sqlite3.connect(f"{sys.argv[1]}/truth-copy.sqlite")
src.backup(dst); dst.close(); src.close()
PY
rm -f "$out/truth.sqlite" "$out"/truth.sqlite-*
