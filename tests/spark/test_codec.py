"""The connector's record codec and partitioner against reference implementations.

Pure tests (no processes) of ``oncelog.client.recordcodec`` and ``oncelog.client.partitioner``:
the vectorised encoder against the per-record reference encoder
(``oncelog.protocol.records.encode_record``), the decoder round trip with offset filtering,
control batches, aborted transactions (Kafka consumer semantics) and compression, and murmur2
against kafka-python's pure-Python port of the Java client. One test at the end fetches
batches that librdkafka compressed from a real broker and decodes them.
"""

from __future__ import annotations

import random
import struct
import time

import confluent_kafka as ck
import cramjam
import crc32c
import numpy as np
import pyarrow as pa
import pytest
from kafka.partitioner.default import murmur2 as kp_murmur2

from oncelog.client.kafka import KafkaClient
from oncelog.client.partitioner import murmur2, partitions_for_keys
from oncelog.client.recordcodec import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    HEADER_TYPE,
    CorruptRecords,
    decode_batches,
    encode_batch,
    encode_records,
    record_sizes,
    split_rows,
)
from oncelog.protocol.records import (
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    HEADER_SIZE,
    build_control_batch,
    encode_record,
    patch_base_offset,
)
from tests.helpers import create_topic

# ---------------------------------------------------------------------------------------------
# Helpers


def reference_records(keys, values, headers=None) -> bytes:
    """The records section as the per-record reference encoder writes it."""
    out = b""
    for i, (k, v) in enumerate(zip(keys, values)):
        hs = headers[i] if headers is not None else None
        out += encode_record(i, 0, k, v, [(hk, hv) for hk, hv in (hs or [])])
    return out


def header_array(headers) -> pa.Array:
    return pa.array([None if hs is None else [{"key": k, "value": v} for k, v in hs] for hs in headers], HEADER_TYPE)


def random_blob(rng: random.Random, *, allow_null: bool = True) -> bytes | None:
    r = rng.random()
    if allow_null and r < 0.1:
        return None
    if r < 0.2:
        return b""
    # around the varint size steps: 1 byte up to 63 (zig-zag), 2 up to 8191, 3 beyond
    n = rng.choice([1, 5, 63, 64, 127, 128, 200, 8191, 8192, 16383, 16384, 20000])
    return rng.randbytes(n)


def random_rows(seed: int, n: int):
    rng = random.Random(seed)
    keys = [random_blob(rng) for _ in range(n)]
    values = [random_blob(rng) for _ in range(n)]
    headers = []
    for _ in range(n):
        if rng.random() < 0.1:
            headers.append(None)  # a null headers list: encoded as zero headers
        else:
            headers.append([(f"h{j}-{'ü' * rng.randint(0, 3)}", random_blob(rng)) for j in range(rng.randint(0, 3))])
    return keys, values, headers


def batch_bytes(records: bytes, count: int, *, base_offset: int, timestamp_ms: int = 1_700_000_000_000,
                max_timestamp_ms: int | None = None, producer_id: int = -1, producer_epoch: int = -1,
                attributes: int = 0, codec: int = COMPRESSION_NONE) -> bytes:
    """A magic-v2 batch whose records section is ``records`` (compressed here with ``codec``)."""
    if codec == COMPRESSION_GZIP:
        records = bytes(cramjam.gzip.compress(records))
    elif codec == COMPRESSION_SNAPPY:
        records = bytes(cramjam.snappy.compress_raw(records))
    elif codec == COMPRESSION_LZ4:
        records = bytes(cramjam.lz4.compress(records))
    elif codec == COMPRESSION_ZSTD:
        records = bytes(cramjam.zstd.compress(records))
    max_ts = timestamp_ms if max_timestamp_ms is None else max_timestamp_ms
    tail = struct.pack(">hiqqqhii", attributes | codec, count - 1, timestamp_ms, max_ts, producer_id,
                       producer_epoch, 0 if producer_id >= 0 else -1, count) + records
    return struct.pack(">qiibI", base_offset, len(tail) + 9, 0, 2, crc32c.crc32c(tail)) + tail


def xerial_snappy(data: bytes, chunk: int) -> bytes:
    """Snappy in the Java client's xerial framing (magic, version, compat, then sized blocks)."""
    out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for i in range(0, len(data), chunk):
        block = bytes(cramjam.snappy.compress_raw(data[i : i + chunk]))
        out += struct.pack(">i", len(block)) + block
    return out


def at(batch: bytes, base_offset: int) -> bytes:
    buf = bytearray(batch)
    patch_base_offset(buf, 0, base_offset)
    return bytes(buf)


def decoded_rows(d, include_headers: bool = False):
    keys, values = d.keys.to_pylist(), d.values.to_pylist()
    rows = list(zip(d.offsets.tolist(), keys, values))
    if include_headers:
        hs = [[(h["key"], h["value"]) for h in row] for row in d.headers.to_pylist()]
        rows = [r + (h,) for r, h in zip(rows, hs)]
    return rows


# ---------------------------------------------------------------------------------------------
# Encoding against the reference encoder


def test_encode_records_matches_reference_with_nulls_empty_long_values_and_headers():
    keys, values, headers = random_rows(1, 300)
    assert any(k is None for k in keys) and any(v == b"" for v in values)
    assert any(v is not None and len(v) > 16383 for v in values)
    assert any(hs and any(hv is None for _, hv in hs) for hs in headers if hs)
    ka, va, ha = pa.array(keys, pa.binary()), pa.array(values, pa.binary()), header_array(headers)
    got = encode_records(ka, va, ha)
    assert got == reference_records(keys, values, headers)
    assert encode_records(ka, va, None) == reference_records(keys, values)
    # record_sizes is what the sink cuts batches with: it must agree with the encoder per record
    sizes = record_sizes(ka, va, ha)
    ref_sizes = [len(encode_record(i, 0, k, v, list(hs or []))) for i, (k, v, hs) in enumerate(zip(keys, values, headers))]
    assert sizes.tolist() == ref_sizes
    assert record_sizes(ka, va, None).tolist() == [len(encode_record(i, 0, k, v)) for i, (k, v) in enumerate(zip(keys, values))]


def test_encode_records_accepts_string_and_large_types():
    keys = ["a", "", None, "ü" * 100, "k" * 200]
    values = ["x" * 200, None, "", "é", "v"]
    ref = reference_records([None if k is None else k.encode() for k in keys],
                            [None if v is None else v.encode() for v in values])
    assert encode_records(pa.array(keys, pa.string()), pa.array(values, pa.string()), None) == ref
    assert encode_records(pa.array(keys, pa.large_string()), pa.array(values, pa.large_string()), None) == ref
    as_bytes = [None if k is None else k.encode() for k in keys]
    assert encode_records(pa.array(as_bytes, pa.large_binary()), pa.array(values, pa.string()), None) == ref


def test_encode_records_without_a_key_column():
    # The sink's DataFrame may have no key column (Spark's Kafka sink allows it): null keys.
    values = [b"v1", None, b"v" * 300]
    ref = reference_records([None] * 3, values)
    va = pa.array(values, pa.binary())
    assert sum(record_sizes(None, va, None)) == len(ref)
    assert encode_records(None, va, None) == ref


@pytest.mark.parametrize("start,stop", [(0, 1), (3, 20), (17, 120), (119, 120), (0, 120)])
def test_encode_records_of_sliced_arrays(start, stop):
    keys, values, headers = random_rows(2, 120)
    ka, va, ha = pa.array(keys, pa.binary()), pa.array(values, pa.binary()), header_array(headers)
    n = stop - start
    sl_k, sl_v, sl_h = ka.slice(start, n), va.slice(start, n), ha.slice(start, n)
    assert sl_k.offset == start  # a real non-zero offset into shared buffers
    ref = reference_records(keys[start:stop], values[start:stop], headers[start:stop])
    assert encode_records(sl_k, sl_v, sl_h) == ref
    assert int(record_sizes(sl_k, sl_v, sl_h).sum()) == len(ref)


def test_encode_records_of_a_null_list_row_that_spans_entries():
    # Arrow allows a null list slot whose offsets still span child entries; they must not leak.
    entries = pa.array([{"key": "a", "value": b"1"}, {"key": "b", "value": None}, {"key": "c", "value": b"3"}],
                       HEADER_TYPE.value_type)
    headers = pa.ListArray.from_arrays(pa.array([0, 1, 2, 3], pa.int32()), entries, mask=pa.array([False, True, False]))
    assert headers.null_count == 1
    ka, va = pa.array([b"k"] * 3), pa.array([b"v"] * 3)
    ref = reference_records([b"k"] * 3, [b"v"] * 3, [[("a", b"1")], None, [("c", b"3")]])
    assert encode_records(ka, va, headers) == ref
    assert int(record_sizes(ka, va, headers).sum()) == len(ref)


def test_encode_records_of_chunked_arrays():
    keys, values, headers = random_rows(3, 90)
    ka, va, ha = pa.array(keys, pa.binary()), pa.array(values, pa.binary()), header_array(headers)
    ck_ = pa.chunked_array([ka.slice(0, 20), ka.slice(20, 50), ka.slice(70)])
    cv = pa.chunked_array([va.slice(0, 7), va.slice(7)])
    ch = pa.chunked_array([ha.slice(0, 33), ha.slice(33)])
    ref = reference_records(keys, values, headers)
    assert encode_records(ck_, cv, ch) == ref
    assert int(record_sizes(ck_, cv, ch).sum()) == len(ref)


def test_encode_records_rejects_null_header_keys():
    headers = pa.array([[{"key": None, "value": b"x"}]], HEADER_TYPE)
    with pytest.raises(ValueError, match="header key is null"):
        encode_records(pa.array([b"k"]), pa.array([b"v"]), headers)


def test_encode_batch_header_and_crc():
    keys, values, _ = random_rows(4, 10)
    records = encode_records(pa.array(keys, pa.binary()), pa.array(values, pa.binary()), None)
    b = encode_batch(records, 10, timestamp_ms=1234, producer_id=77, producer_epoch=3, base_sequence=40,
                     transactional=True)
    (base, length, _ple, magic, crc, attrs, last_delta, first_ts, max_ts, pid, epoch, seq, count) = struct.unpack_from(
        ">qiibIhiqqqhii", b)
    assert (base, length + 12, magic, last_delta, first_ts, max_ts, pid, epoch, seq, count) == (
        0, len(b), 2, 9, 1234, 1234, 77, 3, 40, 10)
    assert attrs & ATTR_TRANSACTIONAL
    assert crc == crc32c.crc32c(b[21:])
    assert b[HEADER_SIZE:] == reference_records(keys, values)


# ---------------------------------------------------------------------------------------------
# Decoding


def _log_of_batches(seed: int, sizes: list[int], *, base: int = 0):
    """Consecutive uncompressed batches holding random rows; returns (blob, expected rows)."""
    rows = []
    blob = b""
    offset = base
    for i, n in enumerate(sizes):
        keys, values, headers = random_rows(seed * 1000 + i, n)
        records = encode_records(pa.array(keys, pa.binary()), pa.array(values, pa.binary()), header_array(headers))
        blob += at(encode_batch(records, n, timestamp_ms=1_000 + i), offset)
        rows += [(offset + j, k, v, [tuple(h) for h in (hs or [])]) for j, (k, v, hs) in enumerate(zip(keys, values, headers))]
        offset += n
    return blob, rows


def test_decode_round_trip_with_headers_and_timestamps():
    blob, rows = _log_of_batches(5, [1, 40, 7, 100])
    d = decode_batches(blob, start_offset=0, end_offset=10**9, include_headers=True)
    assert decoded_rows(d, include_headers=True) == rows
    assert d.next_offset == len(rows)
    # batch i was written with timestamp 1000 + i (CreateTime, delta 0)
    expected_ts = [1_000 + i for i, n in enumerate([1, 40, 7, 100]) for _ in range(n)]
    assert d.timestamps_ms.tolist() == expected_ts
    assert set(d.timestamp_types.tolist()) == {0}
    assert d.offsets.dtype == np.int64 and d.timestamps_ms.dtype == np.int64
    assert d.headers.type == HEADER_TYPE and d.keys.type == pa.binary() and d.values.type == pa.binary()


@pytest.mark.parametrize("start,end", [(0, 148), (0, 1), (1, 41), (5, 30), (41, 47), (45, 100), (147, 148),
                                       (30, 30), (200, 300)])
def test_decode_keeps_only_start_to_end(start, end):
    blob, rows = _log_of_batches(6, [1, 40, 7, 100])
    d = decode_batches(blob, start_offset=start, end_offset=end, include_headers=True)
    want = [r for r in rows if start <= r[0] < end]
    assert decoded_rows(d, include_headers=True) == want
    # the next position: the end when the blob reached it, else after the last batch seen
    assert d.next_offset == (max(start, min(end, len(rows))))


def test_decode_log_append_time_uses_max_timestamp():
    records = encode_records(pa.array([b"a", b"b"]), pa.array([b"1", b"2"]), None)
    b = batch_bytes(records, 2, base_offset=10, timestamp_ms=5, max_timestamp_ms=999, attributes=ATTR_TIMESTAMP_TYPE)
    d = decode_batches(b, start_offset=10, end_offset=12)
    assert d.timestamps_ms.tolist() == [999, 999]
    assert d.timestamp_types.tolist() == [1, 1]


def test_decode_ignores_a_trailing_partial_batch():
    blob, rows = _log_of_batches(7, [10, 10, 10])
    cut = blob[: len(blob) - 5]
    d = decode_batches(cut, start_offset=0, end_offset=100)
    assert decoded_rows(d) == [r[:3] for r in rows[:20]]
    assert d.next_offset == 20
    # a blob shorter than a batch header: nothing, and the position does not move
    d = decode_batches(blob[:30], start_offset=0, end_offset=100)
    assert len(d) == 0 and d.next_offset == 0


def test_decode_raises_on_crc_mismatch():
    blob, _ = _log_of_batches(8, [5, 5])
    bad = bytearray(blob)
    bad[-3] ^= 0xFF  # inside the second batch's last record
    with pytest.raises(CorruptRecords, match="CRC"):
        decode_batches(bytes(bad), start_offset=0, end_offset=100)
    assert len(decode_batches(bytes(bad), start_offset=0, end_offset=100, verify_crc=False)) == 10


def test_decode_raises_on_record_lengths_that_do_not_fit_the_batch():
    records = encode_records(pa.array([b"a", b"b"]), pa.array([b"1", b"2"]), None)
    b = batch_bytes(records, 3, base_offset=0)  # claims 3 records, holds 2
    with pytest.raises(CorruptRecords):
        decode_batches(b, start_offset=0, end_offset=10)


@pytest.mark.parametrize("codec", [COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD])
def test_decode_compressed_batches(codec):
    keys, values, headers = random_rows(9, 200)
    records = encode_records(pa.array(keys, pa.binary()), pa.array(values, pa.binary()), header_array(headers))
    blob = batch_bytes(records, 200, base_offset=100, codec=codec)
    blob += at(encode_batch(encode_records(pa.array([b"x"]), pa.array([b"y"]), None), 1, timestamp_ms=0), 300)
    d = decode_batches(blob, start_offset=150, end_offset=301, include_headers=True)
    want = [(100 + i, k, v, [tuple(h) for h in (hs or [])])
            for i, (k, v, hs) in enumerate(zip(keys, values, headers)) if 100 + i >= 150] + [(300, b"x", b"y", [])]
    assert decoded_rows(d, include_headers=True) == want
    assert d.next_offset == 301


def test_decode_xerial_framed_snappy():
    keys, values, _ = random_rows(10, 50)
    records = encode_records(pa.array(keys, pa.binary()), pa.array(values, pa.binary()), None)
    framed = xerial_snappy(records, chunk=4096)  # several blocks
    tail = struct.pack(">hiqqqhii", COMPRESSION_SNAPPY, 49, 0, 0, -1, -1, -1, 50) + framed
    b = struct.pack(">qiibI", 0, len(tail) + 9, 0, 2, crc32c.crc32c(tail)) + tail
    d = decode_batches(b, start_offset=0, end_offset=50)
    assert decoded_rows(d) == [(i, k, v) for i, (k, v) in enumerate(zip(keys, values))]


class _TxnLog:
    """Builds one partition's log of plain, transactional and control batches, keeping what
    each isolation level must return (computed from how the log was built)."""

    def __init__(self) -> None:
        self.blob = b""
        self.offset = 0
        self.rows: list[tuple[int, bytes, str]] = []  # (offset, value, fate) fate: plain/commit/abort/open
        self.open: dict[int, list[int]] = {}  # pid -> row indexes of its open transaction
        self.aborted_txns: list[tuple[int, int, int]] = []  # (pid, first offset, marker offset)
        self.first: dict[int, int] = {}

    def data(self, n: int, pid: int = -1):
        values = [f"{pid}@{self.offset + i}".encode() for i in range(n)]
        records = encode_records(pa.array([None] * n, pa.binary()), pa.array(values, pa.binary()), None)
        attrs = ATTR_TRANSACTIONAL if pid >= 0 else 0
        self.blob += batch_bytes(records, n, base_offset=self.offset, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                 attributes=attrs)
        for i, v in enumerate(values):
            if pid >= 0:
                self.open.setdefault(pid, []).append(len(self.rows))
                self.first.setdefault(pid, self.offset)
            self.rows.append((self.offset + i, v, "plain" if pid < 0 else "open"))
        self.offset += n

    def end(self, pid: int, commit: bool):
        self.blob += at(build_control_batch(pid, 0, commit, 0, 0), self.offset)
        for i in self.open.pop(pid, []):
            o, v, _ = self.rows[i]
            self.rows[i] = (o, v, "commit" if commit else "abort")
        if not commit:
            self.aborted_txns.append((pid, self.first[pid], self.offset))
        self.first.pop(pid, None)
        self.offset += 1

    def aborted(self, start: int = 0, end: int = 2**62) -> list[tuple[int, int]]:
        """The Fetch response's aborted-transaction list for a fetch of [start, end), as Kafka
        (and oncelog) compute it: the aborted transactions overlapping the range."""
        return [(pid, first) for pid, first, last in self.aborted_txns if last >= start and first < end]

    def expect(self, start: int, end: int, committed: bool) -> list[tuple[int, bytes]]:
        keep = ("plain", "commit") if committed else ("plain", "commit", "abort", "open")
        return [(o, v) for o, v, fate in self.rows if start <= o < end and fate in keep]


def _interleaved_txn_log() -> _TxnLog:
    log = _TxnLog()
    log.data(3)                 # plain
    log.data(2, pid=7)          # pid 7, first transaction: aborted below
    log.data(2, pid=8)          # pid 8: committed
    log.data(1, pid=7)
    log.end(7, commit=False)
    log.data(2)                 # plain, between the two
    log.end(8, commit=True)
    log.data(2, pid=7)          # pid 7's next transaction: committed (the abort marker closed the first)
    log.data(3, pid=9)          # pid 9: aborted
    log.end(7, commit=True)
    log.data(1, pid=9)
    log.end(9, commit=False)
    log.data(2, pid=10)         # pid 10: a transaction made only of aborted records
    log.end(10, commit=False)
    log.data(1)
    return log


def test_decode_read_committed_drops_aborted_transactions_and_markers():
    log = _interleaved_txn_log()
    total = log.offset
    d = decode_batches(log.blob, start_offset=0, end_offset=total, aborted=log.aborted())
    got = list(zip(d.offsets.tolist(), d.values.to_pylist()))
    assert got == log.expect(0, total, committed=True)
    assert {v for _, v, fate in log.rows if fate == "abort"}.isdisjoint(v for _, v in got)
    assert d.next_offset == total
    # read_uncommitted (no aborted list): every data record, still no markers
    d = decode_batches(log.blob, start_offset=0, end_offset=total, aborted=None)
    assert list(zip(d.offsets.tolist(), d.values.to_pylist())) == log.expect(0, total, committed=False)


def test_decode_read_committed_from_every_start_position():
    # The broker answers a Fetch at any position with the batches from there and the aborted
    # transactions that overlap them; the decoder must filter the same way from any start.
    log = _interleaved_txn_log()
    total = log.offset
    for start in range(total + 1):
        for end in (start, start + 1, start + 4, total):
            d = decode_batches(log.blob, start_offset=start, end_offset=end, aborted=log.aborted(start, end))
            assert list(zip(d.offsets.tolist(), d.values.to_pylist())) == log.expect(start, end, committed=True), (start, end)
            assert d.next_offset == max(start, min(end, total))


def test_decode_only_aborted_records_still_moves_the_position():
    log = _TxnLog()
    log.data(5, pid=3)
    log.end(3, commit=False)
    d = decode_batches(log.blob, start_offset=0, end_offset=log.offset, aborted=log.aborted())
    assert len(d) == 0
    assert d.next_offset == log.offset == 6


def test_decode_aborted_compressed_transaction_is_dropped():
    records = encode_records(pa.array([None] * 4, pa.binary()), pa.array([b"a", b"b", b"c", b"d"]), None)
    blob = batch_bytes(records, 4, base_offset=0, producer_id=5, producer_epoch=0, attributes=ATTR_TRANSACTIONAL,
                       codec=COMPRESSION_ZSTD)
    blob += at(build_control_batch(5, 0, False, 0, 0), 4)
    blob += batch_bytes(records, 4, base_offset=5, producer_id=5, producer_epoch=0, attributes=ATTR_TRANSACTIONAL,
                        codec=COMPRESSION_LZ4)
    blob += at(build_control_batch(5, 0, True, 0, 0), 9)
    d = decode_batches(blob, start_offset=0, end_offset=10, aborted=[(5, 0)])
    assert d.offsets.tolist() == [5, 6, 7, 8]
    assert d.values.to_pylist() == [b"a", b"b", b"c", b"d"]


# ---------------------------------------------------------------------------------------------
# split_rows


@pytest.mark.parametrize("seed", range(5))
def test_split_rows_covers_every_row_once_within_the_limit(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 3000, size=500)
    sizes[rng.integers(0, 500, size=5)] = 50_000  # rows larger than the limit
    limit = 20_000
    runs = split_rows(sizes, limit)
    assert runs[0][0] == 0 and runs[-1][1] == len(sizes)
    assert all(a[1] == b[0] for a, b in zip(runs, runs[1:]))
    for s, e in runs:
        assert e > s
        total = int(sizes[s:e].sum())
        if e - s > 1:
            assert total + HEADER_SIZE <= limit
        # greedy: the next row would not have fitted
        if e < len(sizes):
            assert total + int(sizes[e]) + HEADER_SIZE > limit


def test_split_rows_edge_cases():
    assert split_rows(np.array([], dtype=np.int64), 1000) == []
    assert split_rows(np.array([10, 10, 10]), 10**6) == [(0, 3)]
    assert split_rows(np.array([5000, 5000]), 100) == [(0, 1), (1, 2)]


# ---------------------------------------------------------------------------------------------
# murmur2 / default partitioner


def test_murmur2_matches_kafka_python_on_random_keys_of_many_lengths():
    rng = random.Random(11)
    # kafka-python's murmur2 is pure Python: keep the total small (~100 kB)
    keys = [rng.randbytes(n) for n in list(range(0, 70)) * 3 + [rng.randint(70, 1500) for _ in range(120)]]
    keys += [b"", b"a", b"key-1", "ü".encode() * 9]
    data = np.frombuffer(b"".join(keys), dtype=np.uint8)
    lengths = np.array([len(k) for k in keys], dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    got = murmur2(data, starts, lengths)
    assert got.dtype == np.int32
    want = [kp_murmur2(k) for k in keys]
    assert (got.view(np.uint32).astype(np.int64) == np.array(want, dtype=np.int64)).all()
    for num in (1, 3, 7, 64):
        parts = partitions_for_keys(data, starts, lengths, num)
        assert parts.tolist() == [(h & 0x7FFFFFFF) % num for h in want]


def test_partitions_for_keys_of_sliced_positions():
    # keys need not be contiguous or in order in the data buffer
    blob = b"xxhelloyyworldzz"
    data = np.frombuffer(blob, dtype=np.uint8)
    starts, lengths = np.array([9, 2, 0]), np.array([5, 5, 0])
    got = partitions_for_keys(data, starts, lengths, 5)
    assert got.tolist() == [(kp_murmur2(k) & 0x7FFFFFFF) % 5 for k in (b"world", b"hello", b"")]


# ---------------------------------------------------------------------------------------------
# librdkafka's compressed batches from a real broker


def _codecs(blob: bytes) -> list[int]:
    """The compression codec of every whole batch in a Fetch response's records."""
    out, pos = [], 0
    while pos + HEADER_SIZE <= len(blob):
        length = struct.unpack_from(">i", blob, pos + 8)[0]
        out.append(struct.unpack_from(">h", blob, pos + 21)[0] & 0x7)
        pos += length + 12
    return out


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_decode_batches_compressed_by_librdkafka(broker, compression):
    topic = f"comp-{compression}"
    create_topic(broker.bootstrap, topic, 1)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "compression.type": compression, "linger.ms": 50,
                     "batch.num.messages": 300})
    sent = []
    for i in range(600):
        key = None if i % 7 == 0 else f"k{i}".encode()
        value = (f"value-{i}-" * (i % 13)).encode()
        headers = [("h", f"{i}".encode()), ("n", None)] if i % 3 == 0 else None
        p.produce(topic, value=value, key=key, headers=headers, partition=0, timestamp=1_700_000_000_000 + i)
        sent.append((i, key, value, [("h", f"{i}".encode()), ("n", None)] if i % 3 == 0 else []))
    assert p.flush(30) == 0
    client = KafkaClient(broker.bootstrap)
    try:
        got = []
        saw_compressed = False
        position = 0
        deadline = time.monotonic() + 60
        while position < len(sent) and time.monotonic() < deadline:
            pf = client.fetch({(topic, 0): position}, max_wait_ms=200, partition_max_bytes=16384)[(topic, 0)]
            assert pf.error.value == 0
            saw_compressed |= any(codec != COMPRESSION_NONE for codec in _codecs(pf.records))
            d = decode_batches(pf.records, start_offset=position, end_offset=len(sent), aborted=pf.aborted,
                               include_headers=True)
            got += decoded_rows(d, include_headers=True)
            position = d.next_offset
        assert saw_compressed
        assert got == [(o, k, v, h) for o, k, v, h in sent]
        assert d.timestamps_ms[-1] == 1_700_000_000_000 + len(sent) - 1
    finally:
        client.close()
