#!/usr/bin/env bash
# The compiled ranks again, after the trial stopped recording a DDP rank's collectives under a
# dispatch mode (174b995, 1a1b524): gpt2 bf16 fused AdamW, DDP at 8 micro batch 32 compiled
# and eager (the sweep's pair), FSDP2 at 8 micro batch 8 compiled (shards.json's row), then
# the GPU test and compile_probe.py's remaining modes; everything into OUT/recheck.tar.
#   bash experiments/2026-12-05-h200-ranks/recheck.sh OUT [BUDGET_S]
set -u
out=$1 budget=${2:-480}
here=experiments/2026-12-05-h200-ranks
mkdir -p "$out/recheck"
export PYTHONUNBUFFERED=1
start=$SECONDS
run() {  # NAME SETTINGS...
  local name=$1; shift
  if [ $((SECONDS - start)) -gt "$budget" ]; then echo "$name: not started (budget)" >> "$out/recheck/runs.txt"; return; fi
  t0=$SECONDS
  TORCH_LOGS=recompiles,graph_breaks timeout 200 python3 -m advisor run model=gpt2 precision=bf16 \
    optimizer=adamw_fused measure.min_timed_steps=5 "db_url=sqlite:///$out/ranks.sqlite" "$@" \
    --json < /dev/null > "$out/recheck/$name.json" 2> "$out/recheck/$name.err"
  echo "$name rc=$? $((SECONDS - t0))s" >> "$out/recheck/runs.txt"
}
run ddp8-b32-compiled gpus=8 strategy=ddp batch_size=32 compile=true
run ddp8-b32-eager gpus=8 strategy=ddp batch_size=32
run fsdp8-b8-compiled gpus=8 strategy=fsdp batch_size=8 compile=true
run fsdp8-b8-eager gpus=8 strategy=fsdp batch_size=8
if [ $((SECONDS - start)) -lt "$budget" ]; then
  timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider \
    tests/trial/test_one_rank.py::test_a_compiled_ddp_rank_runs_compiled > "$out/recheck/gpu-test.txt" 2>&1
  echo "gpu test rc=$? at $((SECONDS - start))s" >> "$out/recheck/runs.txt"
fi
for mode in ddp8_compile_mode_step fsdp8 fsdp8_compile_blocks ddp8_compile_blocks; do
  if [ $((SECONDS - start)) -gt "$budget" ]; then echo "$mode: not started (budget)" >> "$out/recheck/runs.txt"; continue; fi
  timeout 150 python3 "$here/compile_probe.py" "$out/recheck/compile.jsonl" "$mode" >> "$out/recheck/compile.log" 2>&1
  echo "$mode rc=$? at $((SECONDS - start))s" >> "$out/recheck/runs.txt"
done
python3 - "$out" <<'PY'
import sqlite3, sys
src = sqlite3.connect(f"{sys.argv[1]}/ranks.sqlite"); dst = sqlite3.connect(f"{sys.argv[1]}/recheck/ranks.sqlite")
src.backup(dst); dst.close(); src.close()
PY
tar -C "$out" -cf "$out/recheck.tar" recheck && rm -rf "$out/recheck" "$out/ranks.sqlite"
cat "$out/../runs.txt" 2>/dev/null; ls -la "$out"
