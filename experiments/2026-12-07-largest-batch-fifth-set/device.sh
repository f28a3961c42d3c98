#!/usr/bin/env bash
# One device call: the largest batch within 14 GiB of the fifth set's other five specs,
# estimated on the machine's CPU (largest.py estimate, torch 2.11) and bisected on the GPU,
# five lanes at once.
#   bash experiments/2026-12-07-largest-batch-fifth-set/device.sh OUT
set -u
out=$1
here=experiments/2026-12-07-largest-batch-fifth-set
export OMP_NUM_THREADS=2
mkdir -p "$out/largest"
for i in 0 1 2 3 4; do
  ( python3 "$here/largest.py" estimate "$out/largest/estimates-$i.jsonl" $i > "$out/largest/estimate-$i.log" 2>&1
    python3 "$here/largest.py" bisect $i "$out/largest/estimates-$i.jsonl" "$out/largest/bisect-$i.jsonl" 400 > "$out/largest/bisect-$i.log" 2>&1 ) &
done
wait
nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/largest/gpu.txt"
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())" >> "$out/largest/gpu.txt"
tar -C "$out" -cf "$out/largest.tar" largest && rm -rf "$out/largest"
