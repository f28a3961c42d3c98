#!/usr/bin/env bash
# On the GPU: each spec of specs.txt measured by `advisor run` (with torch's memory snapshot),
# two lanes side by side; OUT/runs/NAME.json and NAME.pickle.gz, packed into OUT/runs.tar.
#   bash experiments/2026-12-07-expandable-segments/measure.sh OUT [BUDGET_S]
set -u
out=$1 budget=${2:-300}
here=experiments/2026-12-07-expandable-segments
models=experiments/2026-12-03-h200-unseen-models
mkdir -p "$out/runs"
export PYTHONUNBUFFERED=1
python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), torch.cuda.get_device_name())" > "$out/runs/versions.txt" 2>&1
start=$SECONDS
lane() {
  grep -E "^$1 " "$here/specs.txt" | while read -r _ name set settings; do
    run=$(echo "$name $settings" | tr ' =' '_-')
    if [ $((SECONDS - start)) -gt "$budget" ]; then echo "$run: not started (budget)" >> "$out/runs/runs.txt"; continue; fi
    t0=$SECONDS
    # shellcheck disable=SC2086
    timeout 240 python3 -m advisor run "workload=$models/$set/$name.py:workload" $settings \
      measure.min_timed_steps=3 measure.max_timed_s=2 "memory_snapshot=$out/runs/$run.pickle" \
      "db_url=sqlite:///$out/truth-$1.sqlite" --json < /dev/null > "$out/runs/$run.json" 2>> "$out/runs/run-$1.err"
    echo "$run rc=$? $((SECONDS - t0))s" >> "$out/runs/runs.txt"
    gzip -f "$out/runs/$run.pickle" 2> /dev/null
  done
}
lane a & lane b & wait
tar -C "$out" -cf "$out/runs.tar" runs && rm -rf "$out/runs"
