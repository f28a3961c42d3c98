"""torch's memory snapshot of a trial (torch.cuda.memory._record_memory_history, the pickle
that pytorch.org/memory_viz loads): recorded while its context is open, written whole or not
at all as the context closes. A snapshot is an extra: failing to write one never costs the
trial its measurement, or an OOM its status."""

from __future__ import annotations

import os
import sys

import torch

MAX_ENTRIES = 100_000  # allocator events kept (torch's docs use this)


class MemorySnapshot:
    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> MemorySnapshot:
        torch.cuda.memory._record_memory_history(max_entries=MAX_ENTRIES)
        return self

    def __exit__(self, *exc: object) -> None:
        partial = self.path + ".part"
        try:
            torch.cuda.memory._dump_snapshot(partial)
            os.replace(partial, self.path)
        except Exception as error:  # (disk full, say): the trial goes on without it
            print(f"advisor: no memory snapshot written to {self.path}: {error}", file=sys.stderr)
            if os.path.exists(partial):
                os.remove(partial)
        finally:
            torch.cuda.memory._record_memory_history(enabled=None)
