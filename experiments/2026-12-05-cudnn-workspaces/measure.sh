#!/usr/bin/env bash
# On the GPU: each spec of specs.txt measured by `advisor run` with torch's memory snapshot, two
# lanes side by side (a, b); everything packed into OUT/snapshots.tar.
#   bash experiments/2026-12-05-cudnn-workspaces/measure.sh OUT [BUDGET_S]
set -u
out=$1 budget=${2:-420}
here=experiments/2026-12-05-cudnn-workspaces
mkdir -p "$out/snapshots"
export PYTHONUNBUFFERED=1
python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), torch.cuda.get_device_name())" > "$out/snapshots/versions.txt" 2>&1
start=$SECONDS
lane() {
  grep -E "^$1 " "$here/specs.txt" | while read -r _ what settings; do
    run=$(echo "${what##*/} ${settings}" | sed 's/\.py:workload//; s/model=//' | tr ' =' '_-')
    if [ $((SECONDS - start)) -gt "$budget" ]; then echo "$run: not started (budget)" >> "$out/snapshots/runs.txt"; continue; fi
    t0=$SECONDS
    # shellcheck disable=SC2086
    timeout 200 python3 -m advisor run "$what" $settings \
      measure.min_timed_steps=3 measure.max_timed_s=2 "memory_snapshot=$out/snapshots/$run.pickle" \
      "db_url=sqlite:///$out/truth-$1.sqlite" --json < /dev/null > "$out/snapshots/$run.json" 2>> "$out/snapshots/run-$1.err"
    echo "$run rc=$? $((SECONDS - t0))s" >> "$out/snapshots/runs.txt"
    gzip -f "$out/snapshots/$run.pickle" 2> /dev/null
  done
}
lane a & lane b & wait
tar -C "$out" -cf "$out/snapshots.tar" snapshots && rm -rf "$out/snapshots"
ls -la "$out"
