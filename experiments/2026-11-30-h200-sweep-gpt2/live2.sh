#!/usr/bin/env bash
# The sweep alone, live on the H200, with the main-effects stop and the climb to the estimate's
# largest batch (see README.md), over bench.py's space with the default budget; its grid is the
# one recorded in raw/grid.jsonl. usage: live2.sh OUT_DIR
out=${1:?}
mkdir -p "$out"
export ADVISOR_DB_URL=sqlite:///$out/advisor.sqlite ADVISOR_STUDY_DB_URL=sqlite:///$out/optuna.sqlite
python3 -m advisor sweep model=gpt2 device=cuda gpu.memory=40GiB 'space.batch_sizes=[8,16,32]' \
  'space.grad_accum=[1,2]' 'space.checkpointing=[none,blocks]' \
  'space.optimizers=[adamw,adamw_fused]' 'space.precision=[bf16]' 'space.channels_last=[false]' \
  'space.compile=[false]' 'space.expandable_segments=[false]' \
  plot="$out/sweep.png" --json > "$out/sweep.json" 2> "$out/sweep.log"
echo "rc=$?"
