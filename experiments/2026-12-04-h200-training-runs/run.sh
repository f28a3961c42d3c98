#!/bin/bash
# The H200 batch: each part of train.py in its own process, then what compare and show print
# for each run against the trial it followed. OUT: where the logs and the database go.
set -u
OUT=${1:?OUT folder}
HERE=$(dirname "$0")
DB="sqlite:///$OUT/runs.sqlite"
for part in measure hf lightning; do
  /usr/bin/time -f "$part: %e s" python3 "$HERE/train.py" $part "$DB" > "$OUT/$part.log" 2>&1
  tail -1 "$OUT/$part.log"
done
python3 "$HERE/train.py" summary "$DB" > "$OUT/summary.json" 2> "$OUT/summary.err"
python3 - "$OUT/summary.json" > "$OUT/pairs" <<'PY'
import json, sys
for run in json.load(open(sys.argv[1])):
    print(run["followed"], run["run"])
PY
while read -r followed run; do
  COLUMNS=120 python3 -m advisor compare "$followed" "$run" db_url="$DB"
  COLUMNS=120 python3 -m advisor show "$run" db_url="$DB"
done < "$OUT/pairs" > "$OUT/compare.txt" 2>&1
COLUMNS=120 python3 -m advisor history kind=training db_url="$DB" >> "$OUT/compare.txt" 2>&1
