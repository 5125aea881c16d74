"""Bulk conversion between Kafka record batches (magic v2) and Arrow columns, sans-IO.

The Spark connector moves millions of rows per second through Python, so nothing here loops in
Python per record except the one walk that finds where each record starts (a record's position
depends on the length of the one before it). Every other field is read or written for all
records at once with numpy: varints are decoded column-wise, and variable-length pieces (keys,
values, header names and values) are moved with one gather (``src[np.repeat(...) + arange]``).

Record layout inside a batch (Kafka's DefaultRecord)::

    length: varint          bytes after this field
    attributes: int8        unused, 0
    timestampDelta: varint  relative to the batch's baseTimestamp
    offsetDelta: varint     relative to the batch's baseOffset
    keyLength: varint       -1 for a null key
    key: bytes
    valueLength: varint     -1 for a null value
    value: bytes
    headerCount: varint
    headers: [headerKeyLength varint, headerKey utf-8, headerValueLength varint, headerValue]

All varints are zig-zag encoded signed integers. The batch header is described in
:mod:`oncelog.protocol.records`.

Invariants: :func:`encode_batch` produces batches that :func:`decode_batches` reads back to the
same columns (tested against a per-record reference encoder and against librdkafka);
:func:`decode_batches` never returns a record outside ``[start_offset, end_offset)``, never a
control record, and never a record of an aborted transaction when given the Fetch response's
aborted-transaction list (Kafka consumer semantics).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..protocol import records as wire_records  # wire_records.crc32c: bound to the C function on first use
from ..protocol.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    CONTROL_ABORT,
    DECOMPRESSED_LIMIT_MAX,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    InvalidBatch,
    decompress_records,
)

# Kafka's compression codec ids (attributes bits 0-2).
COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD = range(5)

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

_U8 = np.uint8
_I64 = np.int64


class CorruptRecords(ValueError):
    """Fetched bytes that cannot be a valid record batch (bad CRC, truncated record, ...)."""


# ---------------------------------------------------------------------------------------------
# Varints, column-wise


def _zigzag(values: np.ndarray) -> np.ndarray:
    v = values.astype(_I64, copy=False)
    return ((v << 1) ^ (v >> 63)).astype(np.uint64)


def _uvarint_sizes(u: np.ndarray) -> np.ndarray:
    sizes = np.ones(len(u), dtype=_I64)
    for k in range(1, 10):
        sizes += u >= np.uint64(1 << (7 * k))
    return sizes


def _uvarint_bytes(u: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The varint bytes of every value, concatenated in order (sizes from _uvarint_sizes)."""
    if len(u) == 0:
        return np.empty(0, dtype=_U8)
    width = int(sizes.max())
    table = np.empty((len(u), width), dtype=_U8)
    for k in range(width):
        byte = ((u >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(_U8)
        table[:, k] = byte | np.where(sizes > k + 1, 0x80, 0).astype(_U8)
    return table[np.arange(width) < sizes[:, None]]


def _read_varints(arr: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode one zig-zag varint at each position of ``arr`` (padded by 10 bytes): (values,
    positions after them)."""
    result = np.zeros(len(pos), dtype=np.uint64)
    size = np.zeros(len(pos), dtype=_I64)
    done = np.zeros(len(pos), dtype=bool)
    for k in range(10):
        byte = arr[pos + k].astype(np.uint64)
        active = ~done
        result |= np.where(active, (byte & np.uint64(0x7F)) << np.uint64(7 * k), np.uint64(0))
        size += active
        done |= byte < 0x80
        if done.all():
            break
    else:
        raise CorruptRecords("varint longer than 10 bytes")
    signed = (result >> np.uint64(1)).astype(_I64) ^ -(result & np.uint64(1)).astype(_I64)
    return signed, pos + size


# ---------------------------------------------------------------------------------------------
# Arrow column access


@dataclass(frozen=True, slots=True)
class _Blobs:
    """A binary/string Arrow array as numpy: data bytes, per-row start and length (-1 = null)."""

    data: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of(cls, array: pa.Array | None, n: int) -> "_Blobs":
        if array is None:
            return cls(np.empty(0, dtype=_U8), np.zeros(n, dtype=_I64), np.full(n, -1, dtype=_I64))
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            array = array.cast(pa.large_binary() if pa.types.is_large_string(array.type) else pa.binary())
        if pa.types.is_large_binary(array.type):
            otype = np.int64
        elif pa.types.is_binary(array.type):
            otype = np.int32
        else:
            raise TypeError(f"expected a binary or string column, got {array.type}")
        bufs = array.buffers()
        offsets = np.frombuffer(bufs[1], dtype=otype)[array.offset : array.offset + len(array) + 1].astype(_I64)
        data = np.frombuffer(bufs[2], dtype=_U8) if bufs[2] is not None else np.empty(0, dtype=_U8)
        lengths = np.diff(offsets)
        if array.null_count:
            lengths = np.where(array.is_null().to_numpy(zero_copy_only=False), -1, lengths)
        return cls(data, offsets[:-1], lengths)


def _sliced_binary(arr: np.ndarray, buffer: pa.Buffer, starts: np.ndarray, lengths: np.ndarray,
                   typ: pa.DataType = pa.binary()) -> pa.Array:
    """An Arrow binary (or string) array of ``buffer[starts[i]:starts[i]+lengths[i]]`` (-1 = null).

    Built as a binary_view array over the buffer (16 bytes of view per element, nothing copied
    per byte in Python) and cast to the plain type by Arrow's C++ kernel. ``arr`` is the buffer
    as numpy, padded by at least 12 bytes so the inline-prefix gather stays in bounds."""
    n = len(lengths)
    lens = np.maximum(lengths, 0).astype(np.int32)
    views = np.zeros((n, 16), dtype=_U8)
    views[:, 0:4] = lens.view(_U8).reshape(n, 4)
    head = arr[starts[:, None] + np.arange(12)]
    head = np.where(np.arange(12)[None, :] < lens[:, None], head, 0).astype(_U8)
    inline = lens <= 12
    views[:, 4:16] = np.where(inline[:, None], head, 0)
    big = ~inline
    if big.any():
        views[big, 4:8] = head[big, :4]
        views[big, 12:16] = starts[big].astype(np.int32).view(_U8).reshape(-1, 4)
    valid = lengths >= 0
    null_count = int(n - valid.sum())
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if null_count else None
    view_type = pa.string_view() if typ == pa.string() else pa.binary_view()
    out = pa.Array.from_buffers(view_type, n, [validity, pa.py_buffer(views), buffer], null_count)
    return out.cast(typ)


# ---------------------------------------------------------------------------------------------
# Encoding


def record_sizes(keys: pa.Array | None, values: pa.Array, headers: pa.Array | None) -> np.ndarray:
    """Encoded size (length prefix included) of each record as :func:`encode_records` writes
    it; used to cut rows into batches before encoding."""
    n = len(values)
    kb, vb = _Blobs.of(keys, n), _Blobs.of(values, n)
    body = 2 + _uvarint_sizes(_zigzag(np.arange(n, dtype=_I64)))  # attributes, ts delta 0, offset delta
    for blob in (kb, vb):
        body = body + _uvarint_sizes(_zigzag(blob.lengths)) + np.maximum(blob.lengths, 0)
    if headers is None:
        body = body + 1
    else:
        body = body + _Headers.of(headers, n).encoded_sizes()
    return body + _uvarint_sizes(_zigzag(body))


@dataclass(frozen=True, slots=True)
class _Headers:
    """A list<struct<key string, value binary>> column as numpy."""

    row_offsets: np.ndarray  # per row, into the flattened header entries
    counts: np.ndarray
    keys: _Blobs
    values: _Blobs

    @classmethod
    def of(cls, array: pa.Array | None, n: int) -> "_Headers | None":
        if array is None:
            return None
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[array.offset : array.offset + n + 1].astype(_I64)
        counts = np.diff(offsets)
        if array.null_count:
            counts = np.where(array.is_null().to_numpy(zero_copy_only=False), 0, counts)
        first, last = int(offsets[0]), int(offsets[-1])
        entries = array.values.slice(first, last - first)
        keys = _Blobs.of(entries.field("key"), len(entries))
        values = _Blobs.of(entries.field("value"), len(entries))
        if (keys.lengths < 0).any():
            raise ValueError("a header key is null; Kafka header keys are non-null strings")
        return cls(offsets - first, counts, keys, values)

    def entry_sizes(self) -> np.ndarray:
        return (_uvarint_sizes(_zigzag(self.keys.lengths)) + np.maximum(self.keys.lengths, 0)
                + _uvarint_sizes(_zigzag(self.values.lengths)) + np.maximum(self.values.lengths, 0))

    def encoded_sizes(self) -> np.ndarray:
        per_entry = np.concatenate([[0], np.cumsum(self.entry_sizes())])
        sums = per_entry[self.row_offsets[1:]] - per_entry[self.row_offsets[:-1]]
        sums = np.where(self.counts > 0, sums, 0)
        return _uvarint_sizes(_zigzag(self.counts)) + sums


def _varint_column(values: np.ndarray) -> pa.Array:
    """A binary column holding the zig-zag varint of each value (no copy of the bytes)."""
    zz = _zigzag(values)
    sizes = _uvarint_sizes(zz)
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum(sizes, out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(values), [None, pa.py_buffer(offsets),
                                                            pa.py_buffer(_uvarint_bytes(zz, sizes))])


def column(values: np.ndarray, typ: pa.DataType | None = None) -> pa.Array:
    """``pa.array(values, typ)`` for a 1-d NumPy array of fixed-width values, built on its buffer.

    Why not ``pa.array``: pyarrow converts any Python or NumPy input through its pandas shim,
    which imports pandas (~0.2 s of CPU) in every Spark Python worker that calls it; the
    connector's workers never need pandas. ``typ`` must have the values' width (int64 for
    ``timestamp("us")``)."""
    values = np.ascontiguousarray(values)
    typ = pa.from_numpy_dtype(values.dtype) if typ is None else typ
    return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(values)])


def binaries(items: list[bytes]) -> pa.Array:
    """A binary array of ``items`` without ``pa.array`` (see :func:`column`)."""
    offsets = np.zeros(len(items) + 1, dtype=np.int32)
    np.cumsum([len(x) for x in items], out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(items), [None, pa.py_buffer(offsets),
                                                           pa.py_buffer(b"".join(items))])


_EMPTY = binaries([b""])[0]  # a binary scalar: the separator of the joins below


def _join(*columns: pa.Array) -> pa.Array:
    # Row-wise concatenation in Arrow's C++ kernel; nulls (null keys, values) contribute nothing,
    # their -1 length varint is in the column before them.
    import pyarrow.compute as pc

    return pc.binary_join_element_wise(*columns, _EMPTY, null_handling="replace", null_replacement="")


def encode_records(keys: pa.Array | None, values: pa.Array, headers: pa.Array | None) -> bytes:
    """The records section of a batch: every row as a Kafka record, offset delta = row index,
    timestamp delta 0. ``keys``/``values`` are binary (or string) Arrow arrays (``keys`` None:
    all keys null, as for a DataFrame without a key column), ``headers`` a
    list<struct<key string, value binary>> array or None."""
    n = len(values)
    kb, vb = _Blobs.of(keys, n), _Blobs.of(values, n)
    # attributes (int8 0) and timestamp delta (varint 0) are two zero bytes in every record
    zeros = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(0, 2 * n + 1, 2, dtype=np.int32)),
                                                   pa.py_buffer(np.zeros(2 * n, dtype=_U8))])
    columns = [zeros, _varint_column(np.arange(n, dtype=_I64)), _varint_column(kb.lengths), _plain(keys, n),
               _varint_column(vb.lengths), _plain(values, n)]
    if headers is None:
        columns.append(pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32)),
                                                               pa.py_buffer(np.zeros(n, dtype=_U8))]))
    else:
        columns += _header_columns(headers, n)
    body = _join(*columns)
    body_offsets = np.frombuffer(body.buffers()[1], dtype=np.int32)[body.offset : body.offset + n + 1]
    records = _join(_varint_column(np.diff(body_offsets).astype(_I64)), body)
    return records.buffers()[2].to_pybytes()[: _data_end(records)]


def _plain(array: pa.Array | None, n: int = 0) -> pa.Array:
    if array is None:  # no key column: every key is null (its -1 length is in the column before)
        return pa.nulls(n, pa.binary())
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_string(array.type):
        return array.cast(pa.binary())
    if pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type):
        return array.cast(pa.binary())
    return array


def _data_end(array: pa.Array) -> int:
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)
    return int(offsets[array.offset + len(array)])


def _header_columns(headers: pa.Array, n: int) -> list[pa.Array]:
    """[header count varint, all header entries of the row encoded] as two binary columns."""
    import pyarrow.compute as pc

    h = _Headers.of(headers, n)
    entries_array = headers.combine_chunks() if isinstance(headers, pa.ChunkedArray) else headers
    first = int(np.frombuffer(entries_array.buffers()[1], dtype=np.int32)[entries_array.offset])
    m = len(h.keys.lengths)
    entries = entries_array.values.slice(first, m)
    encoded = _join(_varint_column(h.keys.lengths), _plain(entries.field("key")),
                    _varint_column(h.values.lengths), _plain(entries.field("value")))
    mask = entries_array.is_null() if entries_array.null_count else None
    per_row = pa.ListArray.from_arrays(column(h.row_offsets.astype(np.int32)), encoded, mask=mask)
    joined = pc.binary_join(per_row, _EMPTY)
    return [_varint_column(h.counts), joined]


_BATCH_TAIL = struct.Struct(">hiqqqhii")
_BATCH_HEAD = struct.Struct(">qiibI")


def encode_batch(records: bytes, count: int, *, timestamp_ms: int, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False,
                 compression: int = COMPRESSION_NONE) -> bytes:
    """Wrap an encoded records section into a magic-v2 batch with its CRC. With
    ``compression`` (a codec id), ``records`` is the section already compressed with it."""
    attributes = (ATTR_TRANSACTIONAL if transactional else 0) | (compression & ATTR_COMPRESSION_MASK)
    tail = _BATCH_TAIL.pack(attributes, count - 1, timestamp_ms, timestamp_ms, producer_id, producer_epoch,
                            base_sequence, count) + records
    crc = wire_records.crc32c(tail)
    return _BATCH_HEAD.pack(0, len(tail) + 9, -1, MAGIC_V2, crc) + tail


def split_rows(sizes: np.ndarray, max_batch_bytes: int) -> list[tuple[int, int]]:
    """Cut rows into [start, end) runs whose encoded records fit in ``max_batch_bytes`` (a row
    larger than the limit gets a run of its own; the broker then answers MESSAGE_TOO_LARGE)."""
    limit = max(1, max_batch_bytes - HEADER_SIZE)
    runs: list[tuple[int, int]] = []
    n = len(sizes)
    start = 0
    cum = np.cumsum(sizes)
    while start < n:
        before = cum[start - 1] if start else 0
        end = int(np.searchsorted(cum, before + limit, side="right"))
        end = max(end, start + 1)
        runs.append((start, end))
        start = end
    return runs


# ---------------------------------------------------------------------------------------------
# Decoding


def _decompress(codec: int, data: bytes) -> bytes:
    # Bounded as the broker bounds it: the client does not know the topic's max.message.bytes, so
    # the broker's largest limit (a batch larger than that was never accepted).
    try:
        return decompress_records(codec, data, DECOMPRESSED_LIMIT_MAX)
    except InvalidBatch as exc:
        raise CorruptRecords(str(exc)) from None


@dataclass
class DecodedRecords:
    """Columns of the records kept from a Fetch response partition, in offset order."""

    keys: pa.Array
    values: pa.Array
    offsets: np.ndarray  # int64
    timestamps_ms: np.ndarray  # int64
    timestamp_types: np.ndarray  # int32: 0 CreateTime, 1 LogAppendTime
    headers: pa.Array | None
    next_offset: int  # the position after the last batch looked at (records, markers, aborted)

    def __len__(self) -> int:
        return len(self.offsets)


class AbortedTransactions:
    """Kafka consumer semantics for read_committed: a transactional batch is dropped when its
    producer has an aborted transaction that started at or before the batch and has not yet
    been closed by its ABORT marker (the Fetch response lists (producer_id, first_offset))."""

    def __init__(self, aborted: list[tuple[int, int]]) -> None:
        self.pending = sorted(aborted, key=lambda a: a[1])
        self.open: set[int] = set()

    def skip(self, producer_id: int, base_offset: int, last_offset: int, control: bool, abort_marker: bool) -> bool:
        while self.pending and self.pending[0][1] <= last_offset:
            self.open.add(self.pending.pop(0)[0])
        if control:
            if abort_marker:
                self.open.discard(producer_id)
            return True
        return producer_id in self.open


def decode_batches(blob: bytes, *, start_offset: int, end_offset: int,
                   aborted: list[tuple[int, int]] | None = None, include_headers: bool = False,
                   verify_crc: bool = True) -> DecodedRecords:
    """Records with offsets in [start_offset, end_offset) from a Fetch partition's ``records``
    bytes. ``aborted`` is the response's aborted-transaction list (read_committed), or None to
    keep every data record (read_uncommitted). A trailing partial batch (the broker may cut the
    response inside one) is ignored; ``next_offset`` tells where to fetch next."""
    view = memoryview(blob)
    filt = AbortedTransactions(aborted) if aborted is not None else None
    parts: list[bytes] = []  # record sections of kept batches
    counts: list[int] = []
    meta: list[tuple[int, int, int]] = []  # (base_offset, base_timestamp or -1, ts type) per kept batch
    next_offset = start_offset
    pos = 0
    end = len(blob)
    while pos + HEADER_SIZE <= end:
        (base_offset, length, _epoch, magic, crc, attributes, last_delta, base_ts, max_ts, producer_id,
         _pepoch, _seq, count) = HEADER.unpack_from(view, pos)
        size = length + LOG_OVERHEAD
        if pos + size > end:
            break  # partial batch at the end of the response
        if magic != MAGIC_V2:
            raise CorruptRecords(f"record batch at offset {base_offset} has magic {magic}; only v2 is read")
        if verify_crc and wire_records.crc32c(view[pos + 21 : pos + size]) != crc:
            raise CorruptRecords(f"CRC mismatch in the record batch at offset {base_offset}")
        last_offset = base_offset + last_delta
        batch_pos = pos
        pos += size
        if last_offset < start_offset:
            continue
        if base_offset >= end_offset:
            break
        next_offset = max(next_offset, min(last_offset + 1, end_offset))
        control = bool(attributes & ATTR_CONTROL)
        if filt is not None and attributes & ATTR_TRANSACTIONAL:
            abort_marker = control and wire_records.control_type(view[batch_pos : batch_pos + size]) == CONTROL_ABORT
            if filt.skip(producer_id, base_offset, last_offset, control, abort_marker):
                continue
        if control:
            continue
        codec = attributes & ATTR_COMPRESSION_MASK
        records = view[batch_pos + HEADER_SIZE : batch_pos + size]
        parts.append(bytes(records) if codec == COMPRESSION_NONE else _decompress(codec, bytes(records)))
        counts.append(count)
        ts_type = 1 if attributes & ATTR_TIMESTAMP_TYPE else 0
        meta.append((base_offset, max_ts if ts_type else base_ts, ts_type))
    return _decode_records(parts, counts, meta, start_offset, end_offset, include_headers, next_offset)


def _decode_records(parts, counts, meta, start_offset, end_offset, include_headers, next_offset) -> DecodedRecords:
    n = sum(counts)
    if n == 0:
        empty = pa.nulls(0, pa.binary())
        return DecodedRecords(empty, empty, np.empty(0, _I64), np.empty(0, _I64), np.empty(0, np.int32),
                              pa.nulls(0, HEADER_TYPE) if include_headers else None, next_offset)
    buf = b"".join(parts) + bytes(16)  # padding for the column-wise varint and prefix reads
    arr = np.frombuffer(buf, dtype=_U8)
    buffer = pa.py_buffer(buf)
    batch_of = np.repeat(np.arange(len(counts), dtype=_I64), counts)
    positions: list[int] = []
    append = positions.append
    pos = 0
    for part, count in zip(parts, counts):
        part_end = pos + len(part)
        for _ in range(count):
            # The record's length varint: one byte below 64, two below 8192 (zig-zag).
            b = buf[pos]
            if b < 0x80:
                pos += 1
                value = b
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    pos += 2
                    value = (b & 0x7F) | (b2 << 7)
                else:
                    shift = 0
                    value = 0
                    while True:
                        value |= (b & 0x7F) << shift
                        pos += 1
                        if not b & 0x80:
                            break
                        shift += 7
                        b = buf[pos]
            append(pos)
            pos += (value >> 1) ^ -(value & 1)
        if pos != part_end:
            raise CorruptRecords(f"record lengths of a batch add up to {pos - (part_end - len(part))} bytes, "
                                 f"the batch holds {len(part)}")
    starts = np.array(positions, dtype=_I64)
    p = starts + 1  # attributes
    ts_delta, p = _read_varints(arr, p)
    off_delta, p = _read_varints(arr, p)
    klen, p = _read_varints(arr, p)
    kstart = p
    p = p + np.maximum(klen, 0)
    vlen, p = _read_varints(arr, p)
    vstart = p
    p = p + np.maximum(vlen, 0)
    base_offsets = np.array([m[0] for m in meta], dtype=_I64)[batch_of]
    offsets = base_offsets + off_delta
    ts_types = np.array([m[2] for m in meta], dtype=np.int32)[batch_of]
    base_ts = np.array([m[1] for m in meta], dtype=_I64)[batch_of]
    timestamps = np.where(ts_types == 1, base_ts, base_ts + ts_delta)
    keep = (offsets >= start_offset) & (offsets < end_offset)
    all_kept = bool(keep.all())

    def sel(a):
        return a if all_kept else a[keep]

    keys = _sliced_binary(arr, buffer, sel(kstart), sel(klen))
    values = _sliced_binary(arr, buffer, sel(vstart), sel(vlen))
    headers = None
    if include_headers:
        hcount, p = _read_varints(arr, p)
        headers = _decode_headers(arr, buffer, p, hcount, keep if not all_kept else None)
    return DecodedRecords(keys, values, sel(offsets), sel(timestamps), sel(ts_types), headers, next_offset)


def _decode_headers(arr: np.ndarray, buffer: pa.Buffer, pos: np.ndarray, counts: np.ndarray,
                    keep: np.ndarray | None) -> pa.Array:
    n = len(counts)
    if (counts < 0).any():
        raise CorruptRecords("negative header count")
    m = int(counts.sum())
    # Entries are laid out record by record; walk header index h over all records that have
    # more than h headers (column-wise), recording each entry's slot.
    row_offsets = np.concatenate([[0], np.cumsum(counts)])
    ks = np.empty(m, _I64); kl = np.empty(m, _I64); vs = np.empty(m, _I64); vl = np.empty(m, _I64)
    p = pos.copy()
    for h in range(int(counts.max()) if n else 0):
        rows = np.nonzero(counts > h)[0]
        slot = row_offsets[rows] + h
        q = p[rows]
        klen, q = _read_varints(arr, q)
        ks[slot], kl[slot] = q, klen
        q = q + np.maximum(klen, 0)
        vlen, q = _read_varints(arr, q)
        vs[slot], vl[slot] = q, vlen
        p[rows] = q + np.maximum(vlen, 0)
    if keep is not None:
        entry_keep = np.repeat(keep, counts)
        ks, kl, vs, vl = ks[entry_keep], kl[entry_keep], vs[entry_keep], vl[entry_keep]
        counts = counts[keep]
    hkeys = _sliced_binary(arr, buffer, ks, kl, pa.string())
    hvalues = _sliced_binary(arr, buffer, vs, vl)
    entries = pa.StructArray.from_arrays([hkeys, hvalues], fields=list(HEADER_TYPE.value_type))
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return pa.ListArray.from_arrays(column(offsets), entries, type=HEADER_TYPE)
