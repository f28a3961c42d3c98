#!/bin/bash
# The H200 batch for issue 28, a device call for each part (each under 10 minutes):
#   run.sh OUT shards    the ranks' shards (11 trials)
#   run.sh OUT sweep     the sweep of a job on 8 GPUs (given 8 minutes), on the same database
#   run.sh OUT one       the fake group at N=1 against the plain step, in plain torch
# OUT: where the logs, JSON and the database go (keep it between the two calls, or copy
# ranks.sqlite back in).
set -u
OUT=${1:?OUT folder}
PART=${2:?shards, sweep or one}
HERE=$(dirname "$0")
if [ "$PART" = one ]; then
  /usr/bin/time -f "one: %e s" python3 "$HERE/fake_one.py" "$OUT/one.jsonl" > "$OUT/one.log" 2>&1
  tail -1 "$OUT/one.log"
  exit
fi
DB="sqlite:///$OUT/ranks.sqlite"
/usr/bin/time -f "$PART: %e s" python3 "$HERE/ranks.py" "$PART" "$DB" "$OUT/$PART.json" \
  > "$OUT/$PART.log" 2>&1
tail -1 "$OUT/$PART.log"
for n in 2 4 8; do
  COLUMNS=120 python3 -m advisor history gpus=$n db_url="$DB" >> "$OUT/history-$PART.txt" 2>&1
done
