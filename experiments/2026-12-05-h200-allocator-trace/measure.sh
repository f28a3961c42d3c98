#!/usr/bin/env bash
# On the GPU: each spec of specs.txt measured by `advisor run` with torch's memory snapshot,
# two lanes side by side (a, b), while fake_traces.py runs the estimate's fake steps on the
# machine's CPU; everything packed into OUT/trace.tar.
#   bash experiments/2026-12-05-h200-allocator-trace/measure.sh OUT [BUDGET_S]
set -u
out=$1 budget=${2:-420}
here=experiments/2026-12-05-h200-allocator-trace
unseen=experiments/2026-12-03-h200-unseen-models
mkdir -p "$out/trace"
export PYTHONUNBUFFERED=1
python3 -c "import torch, transformers, timm, diffusers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'timm', timm.__version__, 'diffusers', diffusers.__version__, torch.cuda.get_device_name())" > "$out/trace/versions.txt" 2>&1
start=$SECONDS
lane() {
  grep -E "^$1 " "$here/specs.txt" | while read -r _ set name settings; do
    run=$(echo "${name} ${settings}" | tr ' =' '_-')
    if [ $((SECONDS - start)) -gt "$budget" ]; then echo "$run: not started (budget)" >> "$out/trace/runs.txt"; continue; fi
    t0=$SECONDS
    # shellcheck disable=SC2086
    timeout 200 python3 -m advisor run "workload=$unseen/$set/$name.py:workload" $settings \
      measure.min_timed_steps=3 measure.max_timed_s=2 "memory_snapshot=$out/trace/$run.pickle" \
      "db_url=sqlite:///$out/truth-$1.sqlite" --json < /dev/null > "$out/trace/$run.json" 2>> "$out/trace/run-$1.err"
    echo "$run rc=$? $((SECONDS - t0))s" >> "$out/trace/runs.txt"
    gzip -f "$out/trace/$run.pickle" 2> /dev/null
  done
}
( timeout "$((budget + 60))" python3 "$here/fake_traces.py" "$out/trace/fake.jsonl" 6 > "$out/trace/fake.log" 2>&1 ) &
lane a & lane b & wait
tar -C "$out" -cf "$out/trace.tar" trace && rm -rf "$out/trace"
ls -la "$out"
