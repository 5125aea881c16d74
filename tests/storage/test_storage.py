"""Partition log and segment tests at the storage level (no sockets)."""

from __future__ import annotations

import os

import pytest

from oncelog.protocol import records as rb
from oncelog.errors import OffsetOutOfRangeError as OffsetOutOfRange
from oncelog.config.settings import LogConfig
from oncelog.storage.partition_log import PartitionLog, RecoveryPoint


def open_log(path, config=None, point=None, clean=False, sync_hw=False):
    return PartitionLog.open(str(path), "t", 0, config or LogConfig(), sync_hw=sync_hw,
                             recovery_point=point, clean_shutdown=clean)


def append(plog, n_records=1, value=b"v", ts=1000):
    raw = bytearray(rb.build_batch([(b"k", value)] * n_records, timestamp_ms=ts))
    first = plog.append(raw, rb.scan_batches(bytes(raw)), ts)[0]
    return first, first + n_records - 1


def flush(plog):
    """What the flusher does: fsync the pending segments, then advance the flushed offset."""
    segments, offset = plog.take_flush_work()
    for seg in segments:
        seg.flush()
    plog.flushed(offset)


def offsets_in(data: bytes) -> list[int]:
    return [b.base_offset for b in rb.scan_batches(data)] if data else []


def test_append_assigns_contiguous_offsets_and_reads_whole_batches(tmp_path):
    plog = open_log(tmp_path)
    assert append(plog, 3) == (0, 2)
    assert append(plog, 2) == (3, 4)
    assert plog.log_end_offset == plog.high_watermark == 5
    assert offsets_in(plog.read(0, 1 << 20, 5)) == [0, 3]
    assert offsets_in(plog.read(4, 1 << 20, 5)) == [3]  # the batch containing offset 4
    assert plog.read(5, 1 << 20, 5) == b""
    with pytest.raises(OffsetOutOfRange):
        plog.read(6, 100, 5)


def test_read_stops_at_upper_bound_and_max_bytes_but_returns_one_oversized_batch(tmp_path):
    plog = open_log(tmp_path)
    for _ in range(10):
        append(plog, 1, b"x" * 500)
    assert offsets_in(plog.read(0, 1 << 20, 4)) == [0, 1, 2, 3]
    one = len(plog.read(0, 1, 10))  # KIP-74: the first batch even if larger than max_bytes
    assert offsets_in(plog.read(0, 1, 10)) == [0]
    assert offsets_in(plog.read(0, one * 3 + 10, 10)) == [0, 1, 2]


def test_segments_roll_by_size_and_reads_cross_them(tmp_path):
    plog = open_log(tmp_path, LogConfig(segment_bytes=2000, index_interval_bytes=100))
    for _ in range(20):
        append(plog, 2, b"y" * 200)
    assert len(plog.segments) >= 5
    seen, offset = [], 0
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20, plog.high_watermark)
        batches = rb.scan_batches(data)
        seen += [b.base_offset for b in batches]
        offset = batches[-1].last_offset + 1
    assert seen == list(range(0, 40, 2))


def test_clean_reopen_keeps_everything(tmp_path):
    plog = open_log(tmp_path, LogConfig(segment_bytes=3000))
    for _ in range(30):
        append(plog, 1, b"z" * 300)
    plog.close()
    again = open_log(tmp_path, LogConfig(segment_bytes=3000), clean=True)
    assert again.log_end_offset == 30
    assert offsets_in(again.read(29, 1 << 20, 30)) == [29]


def _active_path(plog):
    return plog.active.log_path


def test_recovery_truncates_a_torn_tail(tmp_path, caplog):
    plog = open_log(tmp_path)
    for _ in range(5):
        append(plog, 2)
    path = _active_path(plog)
    good_size = plog.active.size
    plog.close()
    with open(path, "ab") as f:  # half of a batch, as a crash mid-write leaves it
        f.write(rb.build_batch([(b"k", b"torn" * 50)], base_offset=10)[:40])
    again = open_log(tmp_path, point=None)
    assert again.log_end_offset == 10
    assert os.path.getsize(path) == good_size
    assert "recovery truncated" in caplog.text and "torn batch header" in caplog.text
    assert append(again, 1) == (10, 10)  # and the log goes on from there


def test_recovery_truncates_at_a_flipped_byte_and_drops_later_segments(tmp_path, caplog):
    cfg = LogConfig(segment_bytes=600)
    plog = open_log(tmp_path, cfg)
    for _ in range(12):
        append(plog, 1, b"q" * 100)
    assert len(plog.segments) >= 3
    first = plog.segments[0]
    bad_segment_path = plog.segments[1].log_path
    boundary = plog.segments[1].base_offset
    plog.close()
    with open(bad_segment_path, "r+b") as f:
        f.seek(80)  # inside the first batch's records: covered by its CRC
        byte = f.read(1)
        f.seek(80)
        f.write(bytes([byte[0] ^ 0x01]))
    again = open_log(tmp_path, cfg, point=RecoveryPoint(first.base_offset, 0, first.base_offset))
    assert again.log_end_offset == boundary
    assert len(again.segments) == 2 and again.segments[1].size == 0
    assert "CRC mismatch" in caplog.text


def test_recovery_point_skips_validating_the_flushed_prefix(tmp_path):
    """Start-up only scans after the checkpoint: damage before it is not even read."""
    cfg = LogConfig(segment_bytes=1 << 20)
    plog = open_log(tmp_path, cfg)
    for _ in range(10):
        append(plog, 1, b"r" * 100)
    point = plog.recovery_point()
    append(plog, 1)
    path = _active_path(plog)
    plog.close()
    with open(path, "r+b") as f:  # corrupt a record before the checkpoint
        f.seek(100)
        f.write(b"\x00\x00")
    again = open_log(tmp_path, cfg, point=point)
    assert again.log_end_offset == 11


def test_delete_records_and_retention_move_the_log_start(tmp_path):
    cfg = LogConfig(segment_bytes=500, retention_bytes=1500, retention_ms=-1)
    plog = open_log(tmp_path, cfg)
    for i in range(20):
        append(plog, 1, b"d" * 100)
    flush(plog)
    assert plog.delete_records(3) == 3
    with pytest.raises(OffsetOutOfRange):
        plog.read(2, 100, 20)
    start = plog.apply_retention(now_ms=10**13)
    assert start == plog.log_start_offset
    assert plog.log_start_offset == plog.segments[0].base_offset > 3
    assert plog.size_bytes <= 1500 + 500
    plog.close()
    again = open_log(tmp_path, cfg, clean=True)
    assert again.log_start_offset == plog.log_start_offset


def test_retention_by_time(tmp_path):
    cfg = LogConfig(segment_bytes=300, retention_ms=1000)
    plog = open_log(tmp_path, cfg)
    for ts in (1000, 2000, 3000, 50_000):
        append(plog, 1, b"e" * 200, ts=ts)
    flush(plog)
    plog.apply_retention(now_ms=10_000)
    assert plog.log_start_offset == 3


def test_offset_for_timestamp(tmp_path):
    plog = open_log(tmp_path, LogConfig(index_interval_bytes=50))
    for ts in (100, 200, 300, 400):
        append(plog, 2, ts=ts)
    assert plog.offset_for_timestamp(250) == (4, 300)
    assert plog.offset_for_timestamp(100) == (0, 100)
    assert plog.offset_for_timestamp(401) is None


def test_high_watermark_waits_for_flush_when_sync_hw(tmp_path):
    plog = open_log(tmp_path, sync_hw=True)
    append(plog, 2)
    assert plog.log_end_offset == 2 and plog.high_watermark == 0
    flush(plog)
    assert plog.high_watermark == 2


def test_compaction_keeps_latest_per_key_and_survives_reopen(tmp_path):
    from oncelog.storage.cleaner import compact

    cfg = LogConfig(segment_bytes=400, cleanup_policy="compact")
    plog = open_log(tmp_path, cfg)
    for i in range(60):
        raw = bytearray(rb.build_batch([(f"key-{i % 5}".encode(), f"value-{i}".encode())], timestamp_ms=1000 + i))
        plog.append(raw, rb.scan_batches(bytes(raw)), 1000 + i)
    flush(plog)
    end = plog.log_end_offset
    before = plog.size_bytes
    saved = compact(plog, now_ms=2000)
    assert saved > 0 and plog.size_bytes < before
    survivors = {}
    for seg in plog.segments:
        for pos, h in seg.iter_headers(0):
            for offset, _, key, value in rb.iter_records(seg.read(pos, h.size)):
                survivors.setdefault(key, []).append((offset, value))
    # each key's latest value survives; older ones only in the (uncompacted) active segment
    for k in range(5):
        latest = max(i for i in range(60) if i % 5 == k)
        assert survivors[f"key-{k}".encode()][-1] == (latest, f"value-{latest}".encode())
    assert plog.log_end_offset == end
    plog.close()
    again = open_log(tmp_path, cfg)  # unclean reopen: recovery accepts the gaps of a compacted log
    assert again.log_end_offset == end
    assert offsets_in(again.read(end - 1, 1 << 20, end)) == [end - 1]


def test_a_flush_round_waiting_for_the_cleaner_syncs_what_is_there_once_it_runs(tmp_path):
    # A flush round that started while the cleaner held the flusher lock must not fsync the
    # segments it would have taken before: the cleaner may have rewritten (and closed) them
    # meanwhile. Seen as "fsync failed: ValueError(fd -1)" and NOT_COORDINATOR answers on a busy
    # __transaction_state with small segments.
    import asyncio

    from oncelog.config.settings import FsyncPolicy
    from oncelog.storage.cleaner import compact
    from oncelog.storage.flusher import Flusher

    async def run():
        cfg = LogConfig(segment_bytes=300, cleanup_policy="compact")
        plog = open_log(tmp_path, cfg, sync_hw=True)
        flusher = Flusher(FsyncPolicy("always"))
        for i in range(60):
            raw = bytearray(rb.build_batch([(f"key-{i % 3}".encode(), b"x" * 40)], timestamp_ms=1000 + i))
            plog.append(raw, rb.scan_batches(bytes(raw)), 1000 + i)
            if i == 29:
                flush(plog)  # the first half is durable: the cleaner may rewrite it
        assert plog.pending_closed  # the second half rolled, not yet fsynced
        async with flusher.lock:  # the cleaner's turn
            durable = flusher.mark(plog, wait=True)  # a round starts and waits for the lock
            await asyncio.sleep(0.05)
            assert compact(plog, now_ms=2000) > 0  # rewrites closed segments
        await asyncio.wait_for(durable, 5)
        assert flusher.failed is None and plog.high_watermark == plog.log_end_offset
        plog.close()

    asyncio.run(run())
