#!/usr/bin/env bash
# On the H200: inductor's generated code (its cache directory's output code) beside a memory
# snapshot of the same run, for compiled resnet50 (bf16, batch 256, channels_last) and gpt2
# (bf16, batch 8), so that the snapshot's lines name the kernels and buffers they allocate.
#   bash experiments/2026-12-03-h200-compiled-snapshots/code.sh OUT_DIR
set -u
out=${1:?OUT_DIR}
lane() {
  local name=$1; shift
  mkdir -p "$out/c/$name"
  TORCHINDUCTOR_CACHE_DIR="$out/cache-$name" TORCHINDUCTOR_FX_GRAPH_CACHE=0 \
    python3 -m advisor run "$@" "db_url=sqlite:///$out/$name.sqlite" \
    "memory_snapshot=$out/c/$name/snapshot.pickle" --json > "$out/c/$name/run.json" 2> "$out/c/$name/run.err"
  echo "$name rc=$?" >> "$out/c/lanes.txt"
  # the output code: python files that define call(args)
  grep -rl --include='*.py' "def call(" "$out/cache-$name" | while read -r f; do
    cp "$f" "$out/c/$name/"
  done
}
lane resnet50 model=resnet50 batch_size=256 precision=bf16 optimizer=adamw channels_last=true compile=true &
lane gpt2 model=gpt2 batch_size=8 precision=bf16 optimizer=adamw compile=true &
wait
gzip -f "$out"/c/*/snapshot.pickle
tar -C "$out" -czf "$out/code.tar.gz" c
