#!/usr/bin/env bash
# On the H200: `advisor run` of every LANES-th line of specs.txt from line LANE (0-based), each
# alone in its lane, into OUT/runs/NAME.json (NAME as compare.py's run_name), the lane's
# database copied with sqlite3's backup API; no new run starts after BUDGET_S seconds.
#   bash experiments/2026-12-03-h200-compile-unseen/measure.sh OUT LANE LANES [BUDGET_S]
set -u
out=$1 lane=$2 lanes=$3 budget=${4:-400}
here=experiments/2026-12-03-h200-compile-unseen
models=experiments/2026-12-03-h200-unseen-models
mkdir -p "$out/runs"
export PYTHONUNBUFFERED=1
start=$SECONDS n=-1
grep -E '^(heldout|second) ' "$here/specs.txt" | while read -r set name settings; do
  n=$((n + 1))
  [ $((n % lanes)) -ne "$lane" ] && continue
  if [ $((SECONDS - start)) -gt "$budget" ]; then echo "$n $name $settings: not started (budget)" >> "$out/runs-$lane.txt"; continue; fi
  run=$(echo "${name} ${settings}" | tr ' =' '_-')
  t0=$SECONDS
  # shellcheck disable=SC2086
  timeout 300 python3 -m advisor run "workload=$models/$set/$name.py:workload" $settings \
    measure.min_timed_steps=3 measure.max_timed_s=2 "db_url=sqlite:///$out/truth-$lane.sqlite" --json \
    < /dev/null > "$out/runs/$run.json" 2>> "$out/run-$lane.err"
  echo "$n $run rc=$? $((SECONDS - t0))s" >> "$out/runs-$lane.txt"
done
python3 - "$out" "$lane" <<'PY'
import sqlite3, sys
src = sqlite3.connect(f"{sys.argv[1]}/truth-{sys.argv[2]}.sqlite")
dst = sqlite3.connect(f"{sys.argv[1]}/truth-{sys.argv[2]}-copy.sqlite")
src.backup(dst); dst.close(); src.close()
PY
rm -f "$out/truth-$lane.sqlite" "$out"/truth-"$lane".sqlite-*
