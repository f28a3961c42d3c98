#!/usr/bin/env bash
# FSDP2's knobs on one rank of 8, measured (issue 28): gpt2 bf16 fused AdamW micro batch 8,
# FSDP2 as is, without resharding after forward, with a bf16/fp32 mixed-precision policy, and
# HSDP over 2 nodes of 4; the uncalibrated rank estimate of each on the machine's CPU beside
# them (public API). Everything into OUT/knobs.tar.
#   bash experiments/2026-12-05-h200-ranks/knobs.sh OUT [BUDGET_S]
set -u
out=$1 budget=${2:-120}
mkdir -p "$out/knobs"
export PYTHONUNBUFFERED=1
base="model=gpt2 precision=bf16 optimizer=adamw_fused batch_size=8 gpus=8"
knobs=("strategy=fsdp fsdp.reshard_after_forward=false"
       "strategy=fsdp fsdp.param_dtype=bf16 fsdp.reduce_dtype=fp32" "strategy=hsdp nodes=2"
       "strategy=fsdp")  # (the last, FSDP2 as is, was measured in the recheck on another H100)
names=(fsdp-keep fsdp-mixed hsdp2 fsdp)
for i in 0 1 2 3; do
  # shellcheck disable=SC2086
  ( timeout "$budget" python3 -m advisor estimate $base ${knobs[$i]} gpu=auto \
      "db_url=sqlite:////tmp/empty-$i.sqlite" --json > "$out/knobs/${names[$i]}.estimate.json" \
      2> "$out/knobs/${names[$i]}.estimate.err" ) &
done
for i in 0 1 2 3; do
  if [ "$SECONDS" -gt "$budget" ]; then echo "${names[$i]}: not started (budget)" >> "$out/knobs/runs.txt"; continue; fi
  # shellcheck disable=SC2086
  timeout 90 python3 -m advisor run $base ${knobs[$i]} measure.min_timed_steps=5 \
    "db_url=sqlite:///$out/knobs.sqlite" --json < /dev/null > "$out/knobs/${names[$i]}.json" \
    2> "$out/knobs/${names[$i]}.err"
  echo "${names[$i]} rc=$? at ${SECONDS}s" >> "$out/knobs/runs.txt"
done
wait
python3 - "$out" <<'PY'
import sqlite3, sys
src = sqlite3.connect(f"{sys.argv[1]}/knobs.sqlite"); dst = sqlite3.connect(f"{sys.argv[1]}/knobs/knobs.sqlite")
src.backup(dst); dst.close(); src.close()
PY
tar -C "$out" -cf "$out/knobs.tar" knobs && rm -rf "$out/knobs" "$out/knobs.sqlite"
