#!/usr/bin/env bash
# On the GPU: `advisor run` of each spec of specs-third.txt, two lanes side by side, each run's
# JSON into OUT/third/NAME.json, the databases copied with sqlite3's backup API, then packed
# into OUT/third.tar.
#   bash experiments/2026-12-05-cuda-dropout/measure.sh OUT [BUDGET_S]
set -u
out=$1 budget=${2:-300}
here=experiments/2026-12-05-cuda-dropout
mkdir -p "$out/third"
export PYTHONUNBUFFERED=1
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())" > "$out/third/versions.txt" 2>&1
start=$SECONDS
lane() {
  grep -E "^$1 " "$here/specs-third.txt" | while read -r _ name settings; do
    run=$(echo "${name} ${settings}" | tr ' =' '_-')
    if [ $((SECONDS - start)) -gt "$budget" ]; then echo "$run: not started (budget)" >> "$out/third/runs.txt"; continue; fi
    t0=$SECONDS
    # shellcheck disable=SC2086
    timeout 150 python3 -m advisor run "workload=$here/third/$name.py:workload" $settings \
      measure.min_timed_steps=3 measure.max_timed_s=2 "db_url=sqlite:///$out/truth-$1.sqlite" \
      --json < /dev/null > "$out/third/$run.json" 2>> "$out/third/run-$1.err"
    echo "$run rc=$? $((SECONDS - t0))s" >> "$out/third/runs.txt"
  done
}
lane a & lane b & wait
python3 - "$out" <<'PY'
import sqlite3, sys
for lane in "ab":
    src = sqlite3.connect(f"{sys.argv[1]}/truth-{lane}.sqlite")
    dst = sqlite3.connect(f"{sys.argv[1]}/third/truth-{lane}.sqlite")
    src.backup(dst); dst.close(); src.close()
PY
tar -C "$out" -cf "$out/third.tar" third && rm -rf "$out/third" "$out"/truth-*.sqlite
