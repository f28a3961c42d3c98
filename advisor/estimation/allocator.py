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

With expandable_segments on (ExpandableSegments), each stream's pool is one range of addresses,
mapped in pages as requests need them.
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
# an expandable pool's range of addresses: PyTorch reserves 9/8 of the device's memory; the
# model's never runs out
ADDRESS_RANGE = 2**50


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
    mapped: bool = True  # (an expandable segment's addresses not yet backed by memory: False)


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
        if self._splits(remaining, small):
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
        self._add_free(self._merged(block))

    def _merged(self, block: Block) -> Block:
        """The block, free, merged with its free neighbours (taken out of the free pool)."""
        block.free = True
        for neighbour in (block.prev, block.next):
            if neighbour is not None and neighbour.free and neighbour.mapped:
                self._remove_free(neighbour)
                block = _joined(block, neighbour)
        return block

    def _splits(self, remaining: int, small: bool) -> bool:
        return remaining >= MIN_BLOCK if small else remaining > SMALL_SIZE

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


class ExpandableSegments(CachingAllocator):
    """The allocator with expandable_segments:True (CUDACachingAllocator.cpp,
    try_allocate_expandable_block): each stream's small and large pools are one range of
    addresses each, mapped in pages of 2 and 20 MiB. A request no free block holds takes the
    lowest unmapped range, with the free block just before it, and maps only the pages it
    lacks; any remainder of 512 B or more is split off; giving the cache back unmaps the whole
    pages inside free blocks. So a freed block at the mapped end grows into the next request,
    where a cudaMalloc'd segment would be left beside a new one. The blocks of unmapped
    addresses are blocks with mapped False (free, in no free pool); each pool's range is a
    segment of its own."""

    def __init__(self, cap: int | None = None) -> None:
        super().__init__(cap)
        self._unmapped: dict[tuple[int, bool], dict[int, Block]] = {}  # by offset

    def _splits(self, remaining: int, small: bool) -> bool:
        return remaining >= MIN_BLOCK

    def _take_free(self, size: int, small: bool, stream: int) -> Block | None:
        """The smallest free block that holds size, where a block that unmapped addresses
        follow counts as large as it could grow: the next larger is taken while it could grow
        less (get_free_block), so the block at the mapped end is kept for what outgrows the
        rest."""
        pool = self._free.get((stream, small), [])
        i = bisect.bisect_left(pool, (size,))
        if i == len(pool):
            return None
        while i + 1 < len(pool) and self._growable(pool[i + 1]) < self._growable(pool[i]):
            i += 1
        _, segment, offset = pool.pop(i)
        return self._blocks.pop((segment, offset))

    def _growable(self, entry: tuple[int, int, int]) -> int:
        size, segment, offset = entry
        after = self._blocks[(segment, offset)].next
        return size + (after.size if after is not None and not after.mapped else 0)

    def _new_segment(self, size: int, small: bool, stream: int) -> Block:
        # under a cap (a trial's set_per_process_memory_fraction), PyTorch weighs the request as
        # the segment cudaMalloc would make for it, not as the pages it maps (alloc_block)
        if self.cap is not None and self.reserved + segment_size(size) > self.cap:
            self.release_free_segments()
            if self.reserved + segment_size(size) > self.cap:
                raise ReplayOutOfMemory(f"{size} bytes: {self.reserved} reserved of {self.cap}")
        block = self._lowest_room(size, small, stream)
        while block.size < size or not block.mapped:  # a free block grows by what it maps
            unmapped = block if not block.mapped else block.next
            assert unmapped is not None and not unmapped.mapped
            need = size - (block.size if block.mapped else 0)
            block = self._map(unmapped, min(unmapped.size, _pages(need, small)), small)
        self._remove_free(block)
        return block

    def _lowest_room(self, size: int, small: bool, stream: int) -> Block:
        """The lowest block from which free and unmapped addresses run for size bytes."""
        unmapped = self._unmapped.setdefault((stream, small), {})
        if not unmapped:
            segment = self._next_segment
            self._next_segment -= 1
            unmapped[0] = Block(segment, 0, ADDRESS_RANGE, small, stream, mapped=False)
        for offset in sorted(unmapped):
            start = unmapped[offset]
            if start.prev is not None and start.prev.free and start.prev.mapped:
                start = start.prev
            room = 0
            following: Block | None = start
            while following is not None and following.free and room < size:
                room += following.size
                following = following.next
            if room >= size:
                return start
        raise AssertionError("the last unmapped range holds any request")

    def _map(self, block: Block, size: int, small: bool) -> Block:
        """Map the first size bytes of an unmapped block, merged with its free neighbours: the
        free block they make (in the free pool)."""
        unmapped = self._unmapped[block.stream, small]
        del unmapped[block.offset]
        if size < block.size:
            rest = Block(block.segment, block.offset + size, block.size - size, small,
                         block.stream, mapped=False, prev=block, next=block.next)  # fmt: skip
            if block.next is not None:
                block.next.prev = rest
            block.next, block.size = rest, size
            unmapped[rest.offset] = rest
        block.mapped = True
        self.reserved += size
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        merged = self._merged(block)
        self._add_free(merged)
        return merged

    def release_free_segments(self) -> None:
        for (_, small), pool in list(self._free.items()):
            page = SMALL_BUFFER if small else LARGE_BUFFER
            for size, segment, offset in list(pool):
                block = self._blocks[(segment, offset)]
                start = -(-offset // page) * page
                end = (offset + size) // page * page
                if end > start:
                    self._unmap(block, start, end, small)

    def _unmap(self, block: Block, start: int, end: int, small: bool) -> None:
        """Give back the pages from start to end of a free block: its head and tail stay free."""
        self._remove_free(block)
        pieces = [(block.offset, start, True), (start, end, False),
                  (end, block.offset + block.size, True)]  # fmt: skip
        before, after, made = block.prev, block.next, []
        for first, last, mapped in pieces:
            if last > first:
                made.append(Block(block.segment, first, last - first, small, block.stream,
                                  mapped=mapped))  # fmt: skip
        for left, right in zip([before, *made], [*made, after], strict=True):
            if left is not None:
                left.next = right
            if right is not None:
                right.prev = left
        unmapped = self._unmapped[block.stream, small]
        for piece in made:
            if piece.mapped:
                self._add_free(piece)
            else:
                unmapped[piece.offset] = piece
                self._merge_unmapped(piece, unmapped)
        self.reserved -= end - start

    def _merge_unmapped(self, block: Block, unmapped: dict[int, Block]) -> None:
        for neighbour in (block.next, block.prev):
            if neighbour is not None and not neighbour.mapped:
                del unmapped[max(block.offset, neighbour.offset)]
                block = _joined(block, neighbour)


def _joined(block: Block, neighbour: Block) -> Block:
    """The block and its neighbour as one, at the lower of their offsets."""
    first, second = (neighbour, block) if neighbour is block.prev else (block, neighbour)
    first.size += second.size
    first.next = second.next
    if second.next is not None:
        second.next.prev = first
    return first


def _pages(size: int, small: bool) -> int:
    page = SMALL_BUFFER if small else LARGE_BUFFER
    return -(-size // page) * page
