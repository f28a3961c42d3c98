"""What was allocated at the peak of T5's measured step (bf16, batch 8, on the H200; the memory
snapshot `advisor run ... memory_snapshot=` wrote), grouped by size, with the Python line that
allocated each group: python3 snapshot_t5.py"""

import collections
import gzip
import pickle
from pathlib import Path

snapshot = pickle.loads(gzip.decompress((Path(__file__).parent / "raw" / "t5-bf16-b8.pickle.gz")
                                        .read_bytes()))  # fmt: skip
alive: dict[int, dict] = {}
live = peak = 0
at_peak: dict[int, dict] = {}
for event in snapshot["device_traces"][0]:
    if event["action"] == "alloc":
        alive[event["addr"]] = event
        live += event["size"]
        if live > peak:
            peak, at_peak = live, dict(alive)
    elif event["action"] == "free_completed" and event["addr"] in alive:
        live -= alive.pop(event["addr"])["size"]
print(f"peak of the recorded allocations: {peak:,} bytes")
groups = collections.defaultdict(list)
for event in at_peak.values():
    groups[event["size"]].append(event)
for size, events in sorted(groups.items(), key=lambda kv: -kv[0] * len(kv[1]))[:6]:
    frames = [f for f in events[0]["frames"] if f["filename"].endswith(".py")]
    where = frames[0] if frames else {"filename": "?", "line": 0, "name": "?"}
    print(f"{len(events):4d} x {size:>11,} bytes  {where['filename'].split('site-packages/')[-1]}"
          f":{where['line']} {where['name']}")  # fmt: skip
