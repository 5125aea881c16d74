"""The offset and time indexes are written in batches, not one pwrite per appended batch (see
oncelog.storage.segment): lookups use the in-memory entries, the files catch up at flush
rounds, rolls, closes and recovery scans, and a crash in between loses nothing recovery needs."""

from __future__ import annotations

import os
import shutil

from oncelog.config.settings import LogConfig
from oncelog.protocol import records as rb
from oncelog.storage import segment as segment_module
from oncelog.storage.partition_log import PartitionLog
from oncelog.storage.segment import INDEX_ENTRY, TIME_ENTRY, Segment

EVERY_BATCH = LogConfig(index_interval_bytes=1)  # an index entry per batch


def open_log(path, config=EVERY_BATCH, point=None, clean=False):
    return PartitionLog.open(str(path), "t", 0, config, sync_hw=False, recovery_point=point, clean_shutdown=clean)


def append(plog, ts: int, n: int = 1) -> int:
    raw = bytearray(rb.build_batch([(b"k", b"v" * 40)] * n, timestamp_ms=ts))
    return plog.append(raw, rb.scan_batches(bytes(raw)), ts)[0]


def flush_round(plog):
    """What the flusher does: take the work (on the loop), fsync it, record the point."""
    segments, offset = plog.take_flush_work()
    point = plog.recovery_point()
    for seg in segments:
        seg.flush()
    plog.flushed(offset)
    return point


def file_entries(seg: Segment):
    with open(seg.index_path, "rb") as f:
        index = [tuple(e) for e in INDEX_ENTRY.iter_unpack(f.read())]
    with open(seg.time_path, "rb") as f:
        times = [tuple(e) for e in TIME_ENTRY.iter_unpack(f.read())]
    return index, times


def memory_entries(seg: Segment):
    seg._ensure_index()
    return (list(zip(seg._index_rel, seg._index_pos)), list(zip(seg._time_ts, seg._time_rel)))


def rebuilt_entries(directory, base: int):
    """The entries a full scan of the .log makes (on a copy of it, without index files)."""
    copy = os.path.join(str(directory), "rebuilt")
    os.makedirs(copy, exist_ok=True)
    name = f"{base:020d}.log"
    shutil.copyfile(os.path.join(str(directory), name), os.path.join(copy, name))
    seg = Segment(copy, base, index_interval=1)
    seg.load_indexes(valid_size=0)
    seg._bytes_since_index = 1
    for pos, header in seg.iter_headers(0):
        seg._maybe_index(header.base_offset, pos, header.max_timestamp)
        seg._bytes_since_index += header.size
    entries = memory_entries(seg)
    seg.delete()
    return entries


def every_offset_reads(plog) -> bool:
    for offset in range(plog.log_start_offset, plog.log_end_offset):
        batch = rb.scan_batches(plog.read(offset, 1 << 20, plog.log_end_offset))[0]
        if not batch.base_offset <= offset <= batch.last_offset:
            return False
    return True


def test_appends_do_not_write_an_entry_each_and_lookups_see_the_pending_ones(tmp_path):
    plog = open_log(tmp_path)
    writes = []
    real = os.pwrite
    segment_module.os.pwrite = lambda fd, data, pos: writes.append(pos) or real(fd, data, pos)
    try:
        for i in range(100):
            append(plog, 1000 + i)
    finally:
        segment_module.os.pwrite = real
    seg = plog.active
    index, times = memory_entries(seg)
    assert len(index) == len(times) == 100
    assert len(writes) <= 4  # the first entry of each file's first page (and nothing per batch)
    assert len(file_entries(seg)[0]) < 100
    assert every_offset_reads(plog)
    assert seg.floor_position(57) == index[57][1]
    assert plog.offset_for_timestamp(1050) == (50, 1050)
    plog.close()


def test_a_flush_round_writes_every_pending_entry_before_the_recovery_point(tmp_path):
    plog = open_log(tmp_path)
    for i in range(700):  # more than a 4 KiB page of offset index and of time index
        append(plog, 1000 + i)
    flush_round(plog)
    assert file_entries(plog.active) == memory_entries(plog.active)
    plog.close()


def test_a_crash_after_a_flush_round_recovers_the_same_index_as_a_full_scan(tmp_path):
    plog = open_log(tmp_path)
    for i in range(300):
        append(plog, 1000 + i)
    point = flush_round(plog)
    for i in range(300, 650):  # appended after the round, then the process dies (no close)
        append(plog, 1000 + i)
    leo = plog.log_end_offset
    reopened = open_log(tmp_path, point=point)  # unclean: the scan starts at the point
    assert reopened.log_end_offset == leo
    assert memory_entries(reopened.active) == rebuilt_entries(tmp_path, 0)
    assert file_entries(reopened.active) == memory_entries(reopened.active)
    assert every_offset_reads(reopened)
    assert reopened.offset_for_timestamp(1600) == (600, 1600)
    reopened.close()


def test_a_crash_before_any_flush_rebuilds_the_index_from_the_log(tmp_path):
    plog = open_log(tmp_path)
    for i in range(200):
        append(plog, 1000 + i)
    reopened = open_log(tmp_path)  # no recovery point: every batch is validated
    assert reopened.log_end_offset == 200
    assert memory_entries(reopened.active) == rebuilt_entries(tmp_path, 0)
    assert file_entries(reopened.active) == memory_entries(reopened.active)
    reopened.close()


def test_a_roll_writes_the_whole_index_of_the_old_segment(tmp_path):
    plog = open_log(tmp_path, LogConfig(index_interval_bytes=1, segment_bytes=20_000))
    for i in range(400):
        append(plog, 1000 + i)
    assert len(plog.segments) > 2
    for seg in plog.segments[:-1]:  # no flush round yet: the roll wrote them
        assert file_entries(seg) == memory_entries(seg)
    # a crash now: the closed segments are trusted as their files are, and serve every offset
    reopened = open_log(tmp_path)
    assert reopened.log_end_offset == 400 and every_offset_reads(reopened)
    for seg in reopened.segments:
        assert memory_entries(seg) == rebuilt_entries(tmp_path, seg.base_offset)
    reopened.close()


def test_a_clean_close_writes_everything_and_a_clean_start_trusts_it(tmp_path):
    plog = open_log(tmp_path)
    for i in range(150):
        append(plog, 1000 + i)
    expected = memory_entries(plog.active)
    plog.close()
    reopened = open_log(tmp_path, clean=True)
    assert memory_entries(reopened.active) == expected
    assert file_entries(reopened.active) == expected
    assert reopened.log_end_offset == 150 and every_offset_reads(reopened)
    reopened.close()


def test_truncation_keeps_the_entries_before_the_cut(tmp_path):
    plog = open_log(tmp_path)
    for i in range(50):
        append(plog, 1000 + i)
    seg = plog.active
    index, _ = memory_entries(seg)
    seg.truncate_to(index[30][1], 30)  # entries 30.. go, the pending ones before stay
    assert memory_entries(seg)[0] == index[:30]
    assert file_entries(seg)[0] == index[:30]
    assert every_offset_reads(plog) if plog.high_watermark <= 30 else True
    plog.close()


def test_a_deleted_segment_does_not_write_its_pending_entries(tmp_path):
    plog = open_log(tmp_path)
    for i in range(20):
        append(plog, 1000 + i)
    seg = plog.active
    writes = []
    real = os.pwrite
    segment_module.os.pwrite = lambda fd, data, pos: writes.append(pos) or real(fd, data, pos)
    try:
        seg.delete()
    finally:
        segment_module.os.pwrite = real
    assert writes == [] and not os.path.exists(seg.index_path)
