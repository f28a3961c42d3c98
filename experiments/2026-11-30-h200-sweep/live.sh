#!/usr/bin/env bash
# The sweep alone, live on the H200, after the designed first trials were added (see README.md).
# usage: live.sh OUT_DIR
out=${1:?}
export ADVISOR_DB_URL=sqlite:///$out/sweep2.sqlite ADVISOR_STUDY_DB_URL=sqlite:///$out/optuna2.sqlite
python3 -m advisor sweep model=resnet50 device=cuda gpu.memory=24GiB \
  'space.batch_sizes=[128,256,512]' 'space.precision=[bf16,fp16]' 'space.checkpointing=[none,blocks]' \
  'space.channels_last=[false,true]' 'space.grad_accum=[1]' 'space.optimizers=[adamw]' \
  'space.compile=[false]' 'space.expandable_segments=[false]' trials=8 patience=0 \
  plot=$out/sweep2.png --json > $out/sweep2.json
