#!/usr/bin/env bash
# Issue 28's open reserve: gpt2 bf16 fused AdamW micro batch 8 as one FSDP2 rank of 8, with and
# without a bf16/fp32 mixed-precision policy (the one that reserved 2.51 GiB over its peak
# allocated on an H100, the other about 1.1), each with a memory snapshot of its allocations.
# Into OUT/snapshots.tar.
#   bash experiments/2026-12-05-allocator-ties/snapshots.sh OUT
set -u
out=$1
mkdir -p "$out/snapshots"
base="model=gpt2 precision=bf16 optimizer=adamw_fused batch_size=8 gpus=8 strategy=fsdp measure.min_timed_steps=5"
for name in fsdp-mixed fsdp; do
  extra=""
  [ "$name" = fsdp-mixed ] && extra="fsdp.param_dtype=bf16 fsdp.reduce_dtype=fp32"
  # shellcheck disable=SC2086
  timeout 120 python3 -m advisor run $base $extra "memory_snapshot=$out/snapshots/$name.pickle" \
    "db_url=sqlite:////tmp/snapshots.sqlite" --json < /dev/null > "$out/snapshots/$name.json" \
    2> "$out/snapshots/$name.err"
  echo "$name rc=$? at ${SECONDS}s" >> "$out/snapshots/runs.txt"
  gzip -f "$out/snapshots/$name.pickle" 2>/dev/null
done
tar -C "$out" -cf "$out/snapshots.tar" snapshots && rm -rf "$out/snapshots"
