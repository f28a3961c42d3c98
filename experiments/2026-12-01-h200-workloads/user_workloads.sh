#!/usr/bin/env bash
# Three user-style workloads on the GPU: a transformers classifier with an attention mask, a
# conv net with its own loss, and a file in the current folder; each through the command line
# (run, sweep on a small space, estimate) and the Python API. Run from the repository root:
#   bash experiments/2026-12-01-h200-workloads/user_workloads.sh OUT_DIR [WORKLOAD ...]
set -u
out=$1; shift; root=$PWD; here=$root/experiments/2026-12-01-h200-workloads
db="sqlite:///$out/user.sqlite"; study="sqlite:///$out/user-optuna.sqlite"
small='trials=3 space.batch_sizes=[32,64] space.precision=[bf16,fp32] space.compile=[false] space.expandable_segments=[false] space.checkpointing=[none] space.grad_accum=[1] gpu.memory=16GiB'
cd "$here"  # so that my_workload.py is a file in the current folder
all=("$root/tests/workloads/bert_classifier.py:workload" "$root/examples/own_model.py:workload" "my_workload.py:workload")
[ $# -eq 0 ] && set -- "${all[@]}"
for w in "$@"; do
  name=$(basename "${w%%:*}" .py)
  echo "== $name: run"
  python3 -m advisor run "workload=$w" device=cuda batch_size=32 precision=bf16 db_url=$db --json > "$out/$name-run.json"; echo "rc=$?"
  echo "== $name: sweep"
  python3 -m advisor sweep "workload=$w" device=cuda $small db_url=$db study_db_url=$study plot=$out/$name-sweep.png --json > "$out/$name-sweep.json"; echo "rc=$?"
  echo "== $name: estimate"
  python3 -m advisor estimate "workload=$w" batch_size=32 precision=bf16 gpu.memory=16GiB db_url=$db --json > "$out/$name-estimate.json"; echo "rc=$?"
  echo "== $name: Python API"
  python3 "$here/api.py" "$w" cuda "sqlite:///$out/api.sqlite" >> "$out/api.jsonl"; echo "rc=$?"
done
