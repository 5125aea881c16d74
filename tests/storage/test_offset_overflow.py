"""A partition can never be bricked by offsets beyond a segment's int32 relative range.

Before record validation a batch whose header claimed 2^31-1 records (with one record inside) was
accepted; the end offset then jumped by 2^31 and, ~4 KiB later, every append failed in the
segment index (relative offsets are int32) — also after any restart. Produce now refuses such a
batch (record validation), and storage keeps the invariant on its own: the log rolls before an
offset would overflow its segment, and recovery splits a segment an older broker left with
overflowed batches (Kafka's splitOverflowedSegment), losing nothing.
"""

from __future__ import annotations

import os
import struct

import crc32c

from oncelog.protocol import records as rb
from oncelog.config.settings import LogConfig
from oncelog.storage.partition_log import PartitionLog
from oncelog.storage.segment import MAX_RELATIVE_OFFSET

HUGE = 2**31 - 1  # records claimed by the lying batch


def lying_batch(count: int, base_offset: int = 0, value: bytes = b"lie") -> bytes:
    """A CRC-valid batch whose header claims ``count`` records but holds one."""
    b = bytearray(rb.build_batch([(b"k", value)], timestamp_ms=1000, base_offset=base_offset))
    struct.pack_into(">i", b, 23, count - 1)  # lastOffsetDelta
    struct.pack_into(">i", b, 57, count)      # recordCount
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


def open_log(path, clean=False):
    return PartitionLog.open(str(path), "t", 0, LogConfig(index_interval_bytes=256), sync_hw=False,
                             recovery_point=None, clean_shutdown=clean)


def append_value(plog, value: bytes) -> int:
    raw = rb.build_batch([(b"k", value)], timestamp_ms=1000)
    return plog.append(bytearray(raw), rb.scan_batches(raw), 1000)[0]


def read_all(plog) -> list[tuple[int, bytes]]:
    """(offset, value) of every record from the log start, segment by segment."""
    out = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20, plog.log_end_offset)
        assert data, f"no data at {offset} below the end {plog.log_end_offset}"
        for h in rb.scan_batches(data):
            # every batch here holds one record (the lying one claims more): read that one
            o, _, _, v = next(rb.iter_records(data[h.position : h.position + h.size]))
            out.append((o, v))
            offset = h.last_offset + 1
    return out


def test_appends_roll_before_an_offset_overflows_the_segment(tmp_path):
    plog = open_log(tmp_path)
    raw = lying_batch(HUGE)
    assert plog.append(bytearray(raw), rb.scan_batches(raw), 1000) == [0]
    offsets = [append_value(plog, b"x" * 100) for _ in range(200)]  # ~25 KiB: many index entries
    assert offsets[0] == HUGE and offsets[-1] == HUGE + 199
    # the batch at HUGE still fits segment 0 (relative offset 2^31-1); the next one rolls
    assert len(plog.segments) == 2 and plog.segments[1].base_offset == HUGE + 1
    assert [v for _, v in read_all(plog)] == [b"lie"] + [b"x" * 100] * 200
    plog.close()
    reopened = open_log(tmp_path, clean=True)
    assert append_value(reopened, b"after") == HUGE + 200


def test_one_append_spanning_more_than_the_relative_range_is_written_in_parts(tmp_path):
    plog = open_log(tmp_path)
    append_value(plog, b"first")
    raw = lying_batch(HUGE) + lying_batch(HUGE) + rb.build_batch([(b"k", b"tail")], timestamp_ms=1000)
    firsts = plog.append(bytearray(raw), rb.scan_batches(raw), 1000)
    assert firsts == [1, 1 + HUGE, 1 + 2 * HUGE]
    for seg in plog.segments:
        assert seg.next_offset - 1 - seg.base_offset <= MAX_RELATIVE_OFFSET
    assert [v for _, v in read_all(plog)] == [b"first", b"lie", b"lie", b"tail"]


def _plant_overflowed_segment(directory) -> list[bytes]:
    """Write the segment an older broker left: the lying batch at 0, then batches at offsets
    beyond 2^31-1 relative to the segment's base, in the same file. Returns their values."""
    os.makedirs(directory, exist_ok=True)
    values = [b"lie"] + [b"v%03d" % i for i in range(40)]
    data = bytearray(lying_batch(HUGE))
    for i, v in enumerate(values[1:]):
        data += rb.build_batch([(b"k", v)], timestamp_ms=1000, base_offset=HUGE + i)
    with open(os.path.join(directory, f"{0:020d}.log"), "wb") as f:
        f.write(data)
    return values


def test_recovery_splits_a_segment_with_overflowed_offsets_and_loses_nothing(tmp_path, caplog):
    values = _plant_overflowed_segment(tmp_path)
    plog = open_log(tmp_path)
    assert "recovery split" in caplog.text
    assert [s.base_offset for s in plog.segments] == [0, HUGE + 1]
    assert plog.log_end_offset == HUGE + 40
    assert read_all(plog) == [(0, b"lie")] + [(HUGE + i, v) for i, v in enumerate(values[1:])]
    assert append_value(plog, b"after") == HUGE + 40
    for _ in range(100):  # enough bytes for new index entries in the split-off segment
        append_value(plog, b"y" * 100)
    plog.close()
    again = open_log(tmp_path, clean=True)
    assert [s.base_offset for s in again.segments] == [0, HUGE + 1]
    assert [v for _, v in read_all(again)] == values + [b"after"] + [b"y" * 100] * 100


def test_a_split_interrupted_after_the_new_file_is_redone(tmp_path):
    """Crash between writing the new segment and cutting the old one: both hold the batches;
    the next recovery splits again, replacing the new file, and nothing is duplicated."""
    values = _plant_overflowed_segment(tmp_path)
    with open(os.path.join(tmp_path, f"{0:020d}.log"), "rb") as f:
        whole = f.read()
    tail_at = rb.scan_batches(whole)[2].position  # offsets 0 and HUGE stay in segment 0
    with open(os.path.join(tmp_path, f"{HUGE + 1:020d}.log"), "wb") as f:
        f.write(whole[tail_at:])
    plog = open_log(tmp_path)
    assert [v for _, v in read_all(plog)] == values
    assert [s.base_offset for s in plog.segments] == [0, HUGE + 1]
    assert os.path.getsize(os.path.join(tmp_path, f"{0:020d}.log")) == tail_at


def test_the_cleaner_never_merges_segments_spanning_more_than_the_relative_range(tmp_path):
    from oncelog.storage.cleaner import cleanable_segments

    plog = PartitionLog.open(str(tmp_path), "t", 0, LogConfig(cleanup_policy="compact"), sync_hw=False,
                             recovery_point=None, clean_shutdown=False)
    append_value(plog, b"a")
    raw = lying_batch(HUGE)
    plog.append(bytearray(raw), rb.scan_batches(raw), 1000)
    plog.roll()
    append_value(plog, b"b")  # offset 1 + HUGE: beyond segment 0's range
    plog.roll()
    append_value(plog, b"c")
    for seg in plog.take_flush_work()[0]:
        seg.flush()
    # segments 0 and 1+HUGE would merge into one based at 0: only the first is cleanable
    assert [s.base_offset for s in cleanable_segments(plog, 1000)] == [0]
