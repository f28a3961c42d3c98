#!/bin/bash
# The H200 batch: the trial, then each variant in a process of its own (in the order given,
# the emitted one first and last, to see drift), then what compare prints.
set -u
OUT=${1:?OUT folder}
PARTS=${2:-measure emitted no_clip gpu_tokens both emitted}  # the second call: measure emitted
                                                           # nan_check lean emitted
HERE=$(dirname "$0")
DB="sqlite:///$OUT/gap.sqlite"
for part in $PARTS; do
  /usr/bin/time -f "$part: %e s" python3 "$HERE/gap.py" $part "$DB" >> "$OUT/$part.log" 2>&1
  tail -1 "$OUT/$part.log"
done
python3 "$HERE/gap.py" summary "$DB" > "$OUT/summary.json" 2> "$OUT/summary.err"
COLUMNS=120 python3 -m advisor history kind=training db_url="$DB" > "$OUT/history.txt" 2>&1
