"""A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), replaying a
sequence of allocations and frees: how much it reserves, and whether it runs out under a cap.

The rules modelled (expandable_segments off, no max_split_size): sizes round up to 512 B;
requests up to 1 MiB come from 2 MiB segments, up to 10 MiB from 20 MiB segments, larger ones
get a segment of their own size rounded up to 2 MiB; a request takes the smallest cached free
block that holds it, splitting off the rest (when over 512 B in the small pool, over 1 MiB in
the large), the lowest address among equal sizes, where a newer segment lies lower (cudaMalloc
handed out falling addresses in the H100's traces: experiments/2026-12-05-allocator-ties); a
freed block merges with free neighbours in its segment; when a new segment would pass the cap,
every wholly free segment is given back first and the request tried again. Each stream has its
own blocks: a block freed on one is not taken by a request on another.
"""

from __future__ import annotations

import bisect
import dataclasses

MiB = 2**20
MIN_BLOCK = 512
SMALL_SIZE = MiB  # the largest request served from the small pool
SMALL_BUFFER = 2 * MiB  # the small pool's segment
LARGE_BUFFER = 20 * MiB  # the segment for requests between 1 and 10 MiB
MIN_LARGE_ALLOC = 10 * MiB
ROUND_LARGE = 2 * MiB


class ReplayOutOfMemory(Exception):
    """The replayed allocations do not fit under the cap (a trial's own OOM is another:
    trial/out_of_memory.py)."""


@dataclasses.dataclass(eq=False)
class Block:
    segment: int
    offset: int
    size: int
    small: bool
    stream: int = 0
    free: bool = True
    prev: Block | None = None
    next: Block | None = None


def round_size(size: int) -> int:
    return max(MIN_BLOCK, -(-size // MIN_BLOCK) * MIN_BLOCK)


def segment_size(size: int) -> int:
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


class CachingAllocator:
    def __init__(self, cap: int | None = None) -> None:
        self.cap = cap
        self.reserved = self.allocated = 0
        self.peak_reserved = self.peak_allocated = 0
        # free blocks, (size, segment, offset), by stream and pool (small or not); segments are
        # numbered down from 0, so that (size, segment, offset) orders blocks as their addresses
        # would: an equal size is taken from the newest segment first
        self._free: dict[tuple[int, bool], list[tuple[int, int, int]]] = {}
        self._blocks: dict[tuple[int, int], Block] = {}  # free blocks by (segment, offset)
        self._segments: dict[int, tuple[Block, int]] = {}  # its block at offset 0, its size
        self._next_segment = 0

    def malloc(self, size: int, stream: int = 0) -> Block:
        size = round_size(size)
        small = size <= SMALL_SIZE
        block = self._take_free(size, small, stream)
        if block is None:
            block = self._new_segment(size, small, stream)
        remaining = block.size - size
        if remaining >= MIN_BLOCK if small else remaining > SMALL_SIZE:
            rest = Block(block.segment, block.offset + size, remaining, small, stream, True,
                         block, block.next)  # fmt: skip
            if block.next is not None:
                block.next.prev = rest
            block.next, block.size = rest, size
            self._add_free(rest)
        block.free = False
        self.allocated += block.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return block

    def free(self, block: Block) -> None:
        self.allocated -= block.size
        block.free = True
        for neighbour in (block.prev, block.next):
            if neighbour is not None and neighbour.free:
                self._remove_free(neighbour)
                first, second = (
                    (neighbour, block) if neighbour is block.prev else (block, neighbour)
                )
                first.size += second.size
                first.next = second.next
                if second.next is not None:
                    second.next.prev = first
                block = first
        self._add_free(block)

    def _take_free(self, size: int, small: bool, stream: int) -> Block | None:
        pool = self._free.get((stream, small), [])
        i = bisect.bisect_left(pool, (size,))
        if i == len(pool):
            return None
        _, segment, offset = pool.pop(i)
        return self._blocks.pop((segment, offset))

    def _new_segment(self, size: int, small: bool, stream: int) -> Block:
        grow = segment_size(size)
        if self.cap is not None and self.reserved + grow > self.cap:
            self.release_free_segments()
            if self.reserved + grow > self.cap:
                raise ReplayOutOfMemory(f"{size} bytes: {self.reserved} reserved of {self.cap}")
        self.reserved += grow
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        block = Block(self._next_segment, 0, grow, small, stream)
        self._segments[self._next_segment] = (block, grow)
        self._next_segment -= 1
        return block

    def release_free_segments(self) -> None:
        for segment, (first, size) in list(self._segments.items()):
            if first.free and first.next is None and first.prev is None:
                self._remove_free(first)
                del self._segments[segment]
                self.reserved -= size

    def _add_free(self, block: Block) -> None:
        pool = self._free.setdefault((block.stream, block.small), [])
        bisect.insort(pool, (block.size, block.segment, block.offset))
        self._blocks[(block.segment, block.offset)] = block

    def _remove_free(self, block: Block) -> None:
        pool = self._free[block.stream, block.small]
        pool.pop(bisect.bisect_left(pool, (block.size, block.segment, block.offset)))
        del self._blocks[(block.segment, block.offset)]
