#!/usr/bin/env bash
# Issue 15's memory snapshot on the H200: the GPU test of memory_snapshot=, then resnet50 b64
# bf16 measured with a snapshot (public command line), its trial shown, and the snapshot's
# size and contents summed up. From the repository root: bash .../device.sh OUT
set -u
out=$1
export PYTHONUNBUFFERED=1 COLUMNS=160
timeout 120 python3 -m pytest -q -m gpu tests/test_gpu.py -k snapshot -p no:cacheprovider > "$out/gpu-tests.txt" 2>&1
echo "gpu tests rc=$?" >> "$out/gpu-tests.txt"
db="sqlite:///$out/snapshot.sqlite"
s=$SECONDS
python3 -m advisor run model=resnet50 batch_size=64 precision=bf16 memory_snapshot="$out/resnet50-b64-bf16.pickle" db_url="$db" --json > "$out/run.json" 2> "$out/run.err"
echo "rc=$? wall_s=$((SECONDS - s))" >> "$out/run.err"
python3 -m advisor show 1 db_url="$db" > "$out/show.txt" 2>&1
python3 - "$out" > "$out/snapshot-summary.txt" <<'PY'
import json, os, pickle, sys
out = sys.argv[1]
path = f"{out}/resnet50-b64-bf16.pickle"
snap = pickle.load(open(path, "rb"))
trial = json.load(open(f"{out}/run.json"))
events = [e for trace in snap["device_traces"] for e in trace]
actions = {}
for e in events:
    actions[e["action"]] = actions.get(e["action"], 0) + 1
reserved = sum(s["total_size"] for s in snap["segments"])
print(f"file: {os.path.getsize(path)} bytes")
print(f"segments at the dump: {len(snap['segments'])}, {reserved} bytes reserved")
print(f"trace events: {len(events)}; by action: {actions}")
print(f"largest alloc: {max(e['size'] for e in events if e['action'] == 'alloc')} bytes")
print(f"trial: status {trial['status']}, steady peak reserved {trial['memory']['steady_peak_reserved_bytes']}, peak reserved {trial['memory']['peak_reserved_bytes']}, {trial['throughput']['samples_per_s']:.1f} samples/s")
PY
python3 - "$out" <<'PY'
import sqlite3, sys
src = sqlite3.connect(f"{sys.argv[1]}/snapshot.sqlite"); dst = sqlite3.connect(f"{sys.argv[1]}/snapshot-copy.sqlite")
src.backup(dst); dst.close(); src.close()
PY
tar -C "$out" -czf /tmp/snapshot.tgz --exclude snapshot.sqlite --exclude 'snapshot.sqlite-*' . && mv /tmp/snapshot.tgz "$out/snapshot.tgz"
find "$out" -mindepth 1 ! -name snapshot.tgz -delete
