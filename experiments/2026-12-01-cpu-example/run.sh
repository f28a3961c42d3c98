#!/usr/bin/env bash
# The README's CPU example, timed as a user would run it, three times in fresh folders (no
# history to reuse). From the repository root, with the venv of README's first command:
#   bash experiments/2026-12-01-cpu-example/run.sh OUT_DIR
set -u
out=$(realpath -m "$1"); root=$PWD; mkdir -p "$out"
for i in 1 2 3; do
  work=$(mktemp -d /tmp/advisor-cpu-XXXX)
  ( cd "$work" && export ADVISOR_DB_URL="sqlite:///$work/advisor.sqlite" \
      ADVISOR_STUDY_DB_URL="sqlite:///$work/optuna.sqlite" COLUMNS=120 &&
    { time "$root"/.venv/bin/advisor sweep model=tiny_cnn device=cpu gpu.memory=64MiB trials=6 \
        plot="$work/sweep.png" ; } ) > "$out/run-$i.txt" 2>&1
done
