"""The allocator's whole history of a compiled spec's real run, build and compile included: why
a compiled step reserves what it reserves. Run on a GPU, as advisor's trial builds and steps it
(the specs and stepping of ../2026-12-06-compiled-partitions/partitions.py). Internal API (the
trial's build and step): the question is the allocator's.

    python history.py NAME OUT_DIR SNAPSHOT_DIR  # NAME-steps.json, SNAPSHOT_DIR/NAME-history.pickle.gz

The snapshot (pytorch.org/memory_viz) holds every allocation, free and segment of the run with
its Python stack; the JSON each step's allocated and reserved figures by phase.
"""

import gzip
import json
import pickle
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "2026-12-06-compiled-partitions"))
import partitions  # noqa: E402

# beside the partitions' specs, two more compiled held-out ones whose device peak missed
partitions.SPECS |= {
    "clip_vit_b32": ("heldout/clip_vit_b32.py", "precision=bf16 batch_size=256"),
    "t5_small": ("heldout/t5_small.py", "precision=bf16 batch_size=32"),
}


def main(name: str, out: str, snapshots: str) -> None:
    from advisor.trial import training

    torch.cuda.memory._record_memory_history(max_entries=2_000_000, stacks="python")
    t = training.build(partitions.spec_of(name, "cuda"), torch.device("cuda"))
    steps = []
    for _ in range(3):
        phases = partitions._stepped(t, steps=1)[0]
        steps.append({"phases": phases, "reserved": torch.cuda.memory_reserved(),
                      "max_reserved": torch.cuda.max_memory_reserved()})  # fmt: skip
    with gzip.open(Path(snapshots) / f"{name}-history.pickle.gz", "wb") as file:
        pickle.dump(torch.cuda.memory._snapshot(), file)
    (Path(out) / f"{name}-steps.json").write_text(
        json.dumps({"name": name, "steps": steps}, indent=1)
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
