#!/usr/bin/env bash
# Issue 28's 1.1B decoder (../2026-12-05-h200-ranks/llama_1b.py, bf16, fused AdamW, micro batch
# 4) as one rank of a job: FSDP2 at 8 and DDP at 2, compiled and eager, by `advisor run`; the
# uncalibrated rank estimate of each on the CPU beside them (public command line, an empty
# database each). Into OUT/ranks.tar.
#   bash experiments/2026-12-05-allocator-ties/llama_ranks.sh OUT [BUDGET_S]
set -u
out=$1 budget=${2:-420}
mkdir -p "$out/ranks"
export PYTHONUNBUFFERED=1
base="workload=experiments/2026-12-05-h200-ranks/llama_1b.py:workload precision=bf16 optimizer=adamw_fused batch_size=4"
plans=("gpus=8 strategy=fsdp compile=true" "gpus=2 strategy=ddp compile=true"
       "gpus=8 strategy=fsdp" "gpus=2 strategy=ddp")
names=(fsdp8-compiled ddp2-compiled fsdp8-eager ddp2-eager)
(
  for i in 0 1 2 3; do
    # shellcheck disable=SC2086
    timeout 300 python3 -m advisor estimate $base ${plans[$i]} gpu=auto \
      "db_url=sqlite:////tmp/empty-$i.sqlite" --json > "$out/ranks/${names[$i]}.estimate.json" \
      2> "$out/ranks/${names[$i]}.estimate.err"
    echo "${names[$i]} estimate rc=$? at ${SECONDS}s" >> "$out/ranks/runs.txt"
  done
) &
for i in 0 1 2 3; do
  if [ "$SECONDS" -gt "$budget" ]; then echo "${names[$i]}: not started (budget)" >> "$out/ranks/runs.txt"; continue; fi
  t0=$SECONDS
  # shellcheck disable=SC2086
  timeout 200 python3 -m advisor run $base ${plans[$i]} measure.min_timed_steps=5 \
    "db_url=sqlite:///$out/ranks.sqlite" --json < /dev/null > "$out/ranks/${names[$i]}.json" \
    2> "$out/ranks/${names[$i]}.err"
  echo "${names[$i]} rc=$? $((SECONDS - t0))s" >> "$out/ranks/runs.txt"
done
wait
python3 - "$out" <<'PY'
import sqlite3, sys
src = sqlite3.connect(f"{sys.argv[1]}/ranks.sqlite"); dst = sqlite3.connect(f"{sys.argv[1]}/ranks/ranks.sqlite")
src.backup(dst); dst.close(); src.close()
PY
tar -C "$out" -cf "$out/ranks.tar" ranks && rm -rf "$out/ranks" "$out/ranks.sqlite"
cat "$out/ranks.tar" > /dev/null
