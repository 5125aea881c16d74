"""The storage layer on a full disk: a real small tmpfs (oncelog.chaos.disk), no fakes.

Invariants: a write the filesystem refuses (ENOSPC, of blocks or of inodes) leaves the log as it
was — no offset assigned, no byte or file left behind — and raises KafkaStorageError; once space
returns the same objects take writes again; what was written before is read back, also after a
reopen with recovery. The derived files (indexes, the aborted-transaction index, snapshots,
checkpoints) never hold a torn or misplaced entry.
"""

from __future__ import annotations

import os

import pytest

from oncelog.chaos.disk import Ballast
from oncelog.config.settings import LogConfig
from oncelog.errors import KafkaStorageError
from oncelog.partition.txn_index import ENTRY, AbortedTxn, AbortedTxnIndex
from oncelog.protocol import records as rb
from oncelog.storage.files import atomic_write
from oncelog.storage.partition_log import PartitionLog

from ..helpers import mount_small_disk

# Mounting a tmpfs runs mount(8): a process.
pytestmark = pytest.mark.e2e

PAGE = 4096


@pytest.fixture
def disk(tmp_path):
    d = mount_small_disk(str(tmp_path / "disk"), 8 << 20)
    yield d
    d.unmount()


@pytest.fixture
def ballast(disk):
    b = Ballast(os.path.join(disk.path, "ballast"))
    yield b
    b.release()


def open_log(path, config=None):
    return PartitionLog.open(str(path), "t", 0, config or LogConfig(), sync_hw=False, recovery_point=None,
                             clean_shutdown=False)


def batch(value: bytes, ts: int = 1000) -> bytearray:
    return bytearray(rb.build_batch([(b"k", value)], timestamp_ms=ts))


def append(plog, value: bytes, ts: int = 1000) -> int:
    raw = batch(value, ts)
    return plog.append(raw, rb.scan_batches(bytes(raw)), ts)[0]


def values(plog) -> list[tuple[int, bytes]]:
    out = []
    for seg, pos, header in plog.batches_from(plog.log_start_offset):
        for offset, _, _, value in rb.iter_records(seg.read(pos, header.size)):
            out.append((offset, value))
    return out


def test_a_refused_append_leaves_no_byte_and_no_offset_and_the_next_one_lands_in_its_place(disk, ballast):
    directory = os.path.join(disk.path, "t-0")
    plog = open_log(directory, LogConfig(index_interval_bytes=1))  # an index entry per batch
    written = [(append(plog, f"before-{i}".encode() * 50), f"before-{i}".encode() * 50) for i in range(20)]
    seg = plog.active
    state = (plog.log_end_offset, plog.high_watermark, seg.size, os.path.getsize(seg.log_path),
             os.path.getsize(seg.index_path), seg.last_index_entry())
    ballast.fill()
    big = os.urandom(64 << 10)  # larger than the slack of the file's last page: must need a new one
    with pytest.raises(KafkaStorageError, match="t-0"):
        append(plog, big)
    assert (plog.log_end_offset, plog.high_watermark, seg.size, os.path.getsize(seg.log_path),
            os.path.getsize(seg.index_path), seg.last_index_entry()) == state
    assert values(plog) == written  # reads are unaffected
    ballast.release()
    offset = append(plog, big)
    assert offset == state[0]  # the offset the refused append would have had
    written.append((offset, big))
    assert values(plog) == written
    plog.close()
    reopened = open_log(directory)  # unclean: every batch is validated
    assert values(reopened) == written and reopened.log_end_offset == offset + 1
    reopened.close()


@pytest.mark.parametrize("free_inodes", [0, 1, 2])
def test_a_roll_that_cannot_create_its_segment_is_undone(tmp_path, free_inodes):
    """Fewer inodes left than a segment's three files: the new segment cannot be created (its
    .log, or its indexes). The roll and the append are refused, no file of the would-be segment
    is left (the next start would take it for one), and once inodes are free again the roll and
    the append happen."""
    disk = mount_small_disk(str(tmp_path / "disk"), 8 << 20, inodes=64)
    try:
        directory = os.path.join(disk.path, "t-0")
        plog = open_log(directory, LogConfig(segment_bytes=2048))
        first = append(plog, b"a" * 1500)
        spare = []
        try:
            while True:
                spare.append(os.path.join(disk.path, f"spare-{len(spare)}"))
                open(spare[-1], "x").close()
        except OSError:
            spare.pop()
        for _ in range(free_inodes):
            os.unlink(spare.pop())
        before = sorted(os.listdir(directory))
        with pytest.raises(KafkaStorageError):
            append(plog, b"b" * 1500)  # does not fit segment.bytes: rolls
        assert sorted(os.listdir(directory)) == before
        assert [s.base_offset for s in plog.segments] == [0] and plog.log_end_offset == first + 1
        for path in spare:
            os.unlink(path)
        second = append(plog, b"b" * 1500)
        assert [s.base_offset for s in plog.segments] == [0, second] == [0, 1]
        assert values(plog) == [(0, b"a" * 1500), (1, b"b" * 1500)]
        plog.close()
    finally:
        disk.unmount()


def test_index_files_that_cannot_grow_stay_a_valid_prefix(disk, ballast):
    """The .log takes an append (it fits the slack of its last page) while the index cannot grow
    by a page: the append stands, the in-memory index keeps every entry, and the file is a prefix
    of it that a reopen accepts."""
    directory = os.path.join(disk.path, "t-0")
    plog = open_log(directory, LogConfig(index_interval_bytes=1))
    for i in range(PAGE // 8):  # exactly one page of index entries: the next entry needs another page
        append(plog, b"x", ts=1000 + i)
    seg = plog.active
    ballast.fill()
    appended = []
    try:
        while True:  # small batches fit the .log's slack; the index file is full
            appended.append(append(plog, b"y", ts=5000 + len(appended)))
    except KafkaStorageError:
        pass
    assert appended, "no append fitted the slack of the .log's last page"
    assert seg.index_files_behind
    assert os.path.getsize(seg.index_path) == PAGE
    assert seg.last_index_entry()[0] == appended[-1]  # every batch has its entry in memory
    for offset in appended:  # lookups through the in-memory entries
        assert rb.scan_batches(plog.read(offset, 1 << 20, plog.log_end_offset))[0].base_offset == offset
    ballast.release()
    plog.close()
    reopened = open_log(directory)
    assert [o for o, _ in values(reopened)] == list(range(PAGE // 8 + len(appended)))
    reopened.close()


def test_atomic_write_that_fails_leaves_the_old_file_and_no_temporary(disk, ballast):
    path = os.path.join(disk.path, "recovery-checkpoint.json")
    atomic_write(path, b"old")
    ballast.fill()
    with pytest.raises(OSError):
        atomic_write(path, b"n" * (2 * PAGE))
    assert open(path, "rb").read() == b"old"
    assert sorted(os.listdir(disk.path)) == ["ballast", "recovery-checkpoint.json"]
    ballast.release()
    atomic_write(path, b"new")
    assert open(path, "rb").read() == b"new"


def test_an_aborted_txn_entry_the_file_cannot_take_is_kept_and_written_whole_later(disk, ballast):
    directory = os.path.join(disk.path, "t-0")
    os.makedirs(directory)
    index = AbortedTxnIndex(directory)
    index.load(log_end_offset=0)
    per_page = PAGE // ENTRY.size  # 120 entries, 16 bytes of slack: the 121st is torn at the page end
    entries = [AbortedTxn(7, 10 * i, 10 * i + 5, 10 * i + 6) for i in range(per_page + 3)]
    for entry in entries[:per_page]:
        index.append(entry)
    ballast.fill()
    for entry in entries[per_page:]:
        index.append(entry)  # never raises: the entry lives in memory
    assert index.behind and index.entries == entries
    assert os.path.getsize(index.path) % ENTRY.size == 0  # no torn entry in the file
    with pytest.raises(OSError):
        index.sync()  # the caller must not snapshot past the missing entries now
    ballast.release()
    index.sync()
    assert not index.behind
    index.close()
    again = AbortedTxnIndex(directory)
    again.load(log_end_offset=10 ** 6)
    assert again.entries == entries
    again.append(AbortedTxn(8, 2000, 2001, 2002))  # appends go on in the rewritten file
    again.close()
    assert os.path.getsize(index.path) == (len(entries) + 1) * ENTRY.size
