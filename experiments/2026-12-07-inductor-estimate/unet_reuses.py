"""The fake step's reuses of 100 MiB and more in the DDPM UNet's compiled step, each with its
answer, for raw/unet-reuses.txt. Internal API (inductor_buffers' reuse planning, wrapped to
print it; the spec from ../2026-12-06-compiled-device-peak/history.py). Run with torch 2.11:

    python unet_reuses.py unet_ddpm
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "2026-12-06-compiled-device-peak"))
from history import partitions  # noqa: E402

from advisor.estimation import inductor_buffers as ib  # noqa: E402
from advisor.estimation.fake_step import fake_step  # noqa: E402

MIB = 2**20
planned = ib._reuses


def printed_reuses(graph, events):
    reuses = planned(graph, events)
    print(f"graph: overall {max(ib._estimated_memory(graph, events)) / MIB:.1f} MiB, "
          f"reuses {len(reuses.taken)}")  # fmt: skip
    pool: dict = {}
    for event in events:
        if event.kind is ib.Happens.FREED:
            pool.setdefault(graph.reuse_key(event.key), []).append((event.key, event.kernel))
        elif (
            event.kind in (ib.Happens.ALLOCATED, ib.Happens.COUNTED)
            and event.in_place_of is None
            and event.member is not None
            and ib._allocated_by_wrapper(event.member)
        ):
            candidates = pool.get(graph.reuse_key(event.key))
            if not candidates:
                continue
            old, freed_at = candidates[-1]
            size = graph.storage[event.key].nbytes()
            if size >= 100 * MIB:
                print(f"  {event.member.name:28s} <- {graph.owner[old].name:28s} "
                      f"freed@{freed_at} alloc@{event.kernel} {size / MIB:.1f} "
                      f"taken {event.key in reuses.taken}")  # fmt: skip
            if event.key in reuses.taken:
                candidates.pop()
    return reuses


ib._reuses = printed_reuses
fake_step(partitions.spec_of(sys.argv[1], "cuda"))
