"""The caching allocator's model against sizes worked out by hand from its rules."""

from __future__ import annotations

import pytest

from advisor.estimation.allocator import (
    CachingAllocator,
    ExpandableSegments,
    MiB,
    ReplayOutOfMemory,
)


def test_requests_come_from_segments_sized_by_pool():
    allocator = CachingAllocator()
    allocator.malloc(100)  # small pool: a 2 MiB segment
    allocator.malloc(5 * MiB)  # between 1 and 10 MiB: a 20 MiB segment
    allocator.malloc(15 * MiB + 1)  # larger: its own size, rounded up to 2 MiB
    assert allocator.reserved == 2 * MiB + 20 * MiB + 16 * MiB
    # the last segment's 1 MiB - 512 B remainder is too small to split off: the block keeps it
    assert allocator.allocated == 512 + 5 * MiB + 16 * MiB


def test_a_segment_is_split_and_a_freed_block_reused():
    allocator = CachingAllocator()
    first = allocator.malloc(5 * MiB)
    allocator.malloc(5 * MiB)  # the rest of the first 20 MiB segment
    assert allocator.reserved == 20 * MiB
    allocator.free(first)
    allocator.malloc(4 * MiB)  # fits in the freed block: nothing new reserved
    assert allocator.reserved == 20 * MiB


def test_each_stream_keeps_its_own_blocks():
    """A block freed on one stream is not taken by a request on another (FSDP2's gathers and
    reduce-scatters run on streams of their own), though a request on its own stream takes it,
    and the split-off rest of a segment stays its stream's."""
    allocator = CachingAllocator()
    gathered = allocator.malloc(5 * MiB, stream=1)  # a 20 MiB segment on stream 1
    allocator.free(gathered)
    allocator.malloc(5 * MiB)  # the default stream: a segment of its own
    assert allocator.reserved == 40 * MiB
    allocator.malloc(5 * MiB)  # its own segment's rest
    allocator.malloc(15 * MiB, stream=1)  # stream 1's freed segment, whole
    assert allocator.reserved == 40 * MiB


def test_freed_neighbours_merge():
    allocator = CachingAllocator()
    blocks = [allocator.malloc(5 * MiB) for _ in range(4)]  # one 20 MiB segment, full
    allocator.free(blocks[1])
    allocator.free(blocks[2])
    allocator.malloc(10 * MiB - 512)  # only the merged middle holds it (a 10 MiB request
    assert allocator.reserved == 20 * MiB  # would get a segment of its own)


def test_under_a_cap_the_cache_is_given_back_before_it_fails():
    allocator = CachingAllocator(cap=40 * MiB)
    cached = allocator.malloc(20 * MiB)
    allocator.free(cached)  # a wholly free 20 MiB segment stays reserved
    allocator.malloc(30 * MiB)  # 20 + 30 > 40: the free segment goes back first
    assert allocator.reserved == 30 * MiB
    assert allocator.peak_reserved == 30 * MiB


def test_fragmentation_that_the_cap_cannot_undo():
    allocator = CachingAllocator(cap=40 * MiB)
    segment = allocator.malloc(30 * MiB)
    allocator.free(segment)
    allocator.malloc(10 * MiB)  # takes 10 MiB of the cached 30: the rest is free but pinned
    with pytest.raises(ReplayOutOfMemory):
        allocator.malloc(21 * MiB)  # 20 MiB free in the segment is not enough, 30 + 22 > 40


def test_equal_free_blocks_are_taken_from_the_newest_segment_first():
    """The real allocator takes the lowest address among equal sizes, and cudaMalloc handed out
    falling addresses (experiments/2026-12-05-allocator-ties: breaking ties this way replays
    whisper's real trace to the byte, where oldest-first was 6.3% under)."""
    allocator = CachingAllocator()
    older = allocator.malloc(30 * MiB)
    newer = allocator.malloc(30 * MiB)
    allocator.free(older)
    allocator.free(newer)
    assert allocator.malloc(10 * MiB).segment == newer.segment
    assert allocator.malloc(30 * MiB).segment == older.segment  # the newer one is split now


def test_with_expandable_segments_a_freed_block_at_the_end_grows_into_a_larger_request():
    """expandable_segments:True maps a pool's one range of addresses in 20 MiB pages (2 MiB in
    the small pool): a 50 MiB request after a freed 30 MiB block maps the 20 MiB that the
    block and its page's rest lack, where cudaMalloc'd segments would hold 30 and 50 MiB."""
    for allocator, reserved in ((CachingAllocator(), 80 * MiB), (ExpandableSegments(), 60 * MiB)):
        allocator.free(allocator.malloc(30 * MiB))
        assert allocator.malloc(50 * MiB).offset == 0
        assert allocator.reserved == reserved


def test_with_expandable_segments_the_small_pool_maps_2_mib_pages():
    allocator = ExpandableSegments()
    for _ in range(5):
        allocator.malloc(600 * 1024)  # five small blocks, 2.9 MiB: two pages
    assert allocator.reserved == 4 * MiB


def test_with_expandable_segments_giving_the_cache_back_unmaps_the_pages_of_free_blocks():
    allocator = ExpandableSegments()
    first = allocator.malloc(30 * MiB)  # two pages; the second's rest is free
    allocator.malloc(5 * MiB)  # from that rest, at 30 MiB
    allocator.free(first)
    allocator.release_free_segments()  # the first page, wholly free, goes back
    assert allocator.reserved == 20 * MiB
    # the lowest unmapped range with the free block after it: the first page, mapped again
    assert allocator.malloc(25 * MiB).offset == 0
    assert allocator.reserved == 40 * MiB


def test_with_expandable_segments_a_request_counts_under_a_cap_as_a_segment_of_its_own():
    """Under a cap (a trial's set_per_process_memory_fraction), PyTorch weighs a request no free
    block holds as the segment cudaMalloc would make for it, not as the pages it would map:
    with 40 MiB mapped, 25 MiB fails under 60 (40 + 26 > 60), though one more page holds it."""
    allocator = ExpandableSegments(cap=60 * MiB)
    allocator.malloc(30 * MiB)  # two pages; 10 MiB of the second free
    with pytest.raises(ReplayOutOfMemory):
        allocator.malloc(25 * MiB)
    allocator.malloc(20 * MiB)  # 40 + 20 is the cap: the free 10 MiB and one more page
    assert allocator.reserved == 60 * MiB


def test_with_expandable_segments_the_free_block_at_the_mapped_end_is_kept_for_growing():
    """Among free blocks that hold a request, one that unmapped addresses follow counts as
    large as it could grow (get_free_block): the larger block in the middle is taken."""
    allocator = ExpandableSegments()
    middle = allocator.malloc(40 * MiB)
    allocator.malloc(10 * MiB)  # a third page, half of it free
    end = allocator.malloc(30 * MiB)  # that half and one more page
    allocator.free(middle)
    allocator.free(end)  # 30 MiB free at the mapped end, 40 in the middle
    assert allocator.malloc(25 * MiB).offset == middle.offset == 0


def test_with_expandable_segments_a_request_maps_a_given_back_range_and_the_end_together():
    allocator = ExpandableSegments()
    first = allocator.malloc(50 * MiB)  # three pages; 10 MiB of the third free
    second = allocator.malloc(10 * MiB)  # that 10 MiB
    allocator.free(first)
    allocator.release_free_segments()  # its two whole pages go back: 0 to 40 MiB unmapped
    allocator.free(second)  # free from 40 to 60 MiB
    # the lowest unmapped range, the free block after it and two new pages at the end
    assert allocator.malloc(100 * MiB).offset == 0
    assert allocator.reserved == 100 * MiB
