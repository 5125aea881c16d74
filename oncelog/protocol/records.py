"""Header-only handling of Kafka record batches (magic v2).

The broker never parses individual records on its hot path. A produce request's ``records``
field is a concatenation of record batches; each batch starts with a fixed 61-byte header::

    offset  size  field
    0       8     baseOffset            (assigned by the broker; patched in place)
    8       4     batchLength           (bytes after this field)
    12      4     partitionLeaderEpoch  (patched in place; not covered by the CRC)
    16      1     magic                 (must be 2)
    17      4     crc                   (CRC32C of bytes 21..end)
    21      2     attributes            (bits 0-2 compression, 3 timestamp type,
                                         4 transactional, 5 control)
    23      4     lastOffsetDelta
    27      8     baseTimestamp
    35      8     maxTimestamp
    43      8     producerId
    51      2     producerEpoch
    53      4     baseSequence
    57      4     recordCount
    61      ...   records (possibly compressed)

Invariants: a batch accepted by :func:`scan_batches` has magic 2, a CRC that matches, a
length that fits the buffer, ``recordCount >= 1`` and ``lastOffsetDelta == recordCount - 1``
(what every producer writes). Because the CRC covers neither ``baseOffset`` nor
``partitionLeaderEpoch``, the broker can assign offsets by patching those bytes without
recomputing the checksum.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted by batchLength
MAGIC_V2 = 2

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

_BASE_OFFSET = struct.Struct(">q")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_MAX_TIMESTAMP = struct.Struct(">q")


class InvalidBatch(ValueError):
    """A record batch failed header validation; ``reason`` names what was wrong."""

    def __init__(self, reason: str, *, corrupt: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        # corrupt=True maps to CORRUPT_MESSAGE, False to INVALID_RECORD.
        self.corrupt = corrupt


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fields of one record batch header plus where it sits in its buffer."""

    position: int
    size: int  # total bytes including the 12-byte log overhead
    base_offset: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        # Sequences wrap at int32 max, as in Kafka's DefaultRecordBatch.incrementSequence.
        return (self.base_sequence + self.last_offset_delta) % 0x80000000


def parse_header(buf, position: int = 0) -> BatchHeader:
    """Unpack the header at ``position`` without validating the CRC."""
    fields = HEADER.unpack_from(buf, position)
    return BatchHeader(position, fields[1] + LOG_OVERHEAD, fields[0], *fields[2:])


def scan_batches(
    buf: bytes | memoryview, *, max_batch_bytes: int | None = None, verify_crc: bool = True
) -> list[BatchHeader]:
    """Validate and list the batches of a produce request's records field.

    Raises :class:`InvalidBatch` on the first problem; the caller writes nothing in that case.
    """
    view = memoryview(buf)
    end = len(view)
    if end == 0:
        raise InvalidBatch("empty records field", corrupt=False)
    batches: list[BatchHeader] = []
    pos = 0
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise InvalidBatch(f"truncated batch header at byte {pos} ({end - pos} bytes left)")
        header = parse_header(view, pos)
        if header.magic != MAGIC_V2:
            raise InvalidBatch(f"unsupported magic {header.magic} at byte {pos}", corrupt=False)
        if header.size < HEADER_SIZE or pos + header.size > end:
            raise InvalidBatch(f"batch length {header.size - LOG_OVERHEAD} at byte {pos} overruns the buffer")
        if max_batch_bytes is not None and header.size > max_batch_bytes:
            raise BatchTooLarge(header.size, max_batch_bytes)
        if verify_crc:
            actual = crc32c.crc32c(view[pos + 21 : pos + header.size])
            if actual != header.crc:
                raise InvalidBatch(
                    f"CRC mismatch at byte {pos}: header says {header.crc:#010x}, data gives {actual:#010x}"
                )
        if header.record_count < 1 or header.last_offset_delta != header.record_count - 1:
            raise InvalidBatch(
                f"record count {header.record_count} does not match last offset delta "
                f"{header.last_offset_delta}",
                corrupt=False,
            )
        batches.append(header)
        pos += header.size
    return batches


class BatchTooLarge(ValueError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"record batch of {size} bytes exceeds max.message.bytes={limit}")
        self.size = size
        self.limit = limit


def patch_base_offset(buf: bytearray, position: int, base_offset: int) -> None:
    """Write the broker-assigned base offset into a batch (not covered by the CRC)."""
    _BASE_OFFSET.pack_into(buf, position, base_offset)


def pack_base_offset(base_offset: int) -> bytes:
    return _BASE_OFFSET.pack(base_offset)


def set_log_append_time(buf: bytearray, header: BatchHeader, timestamp_ms: int) -> None:
    """Rewrite a batch for ``message.timestamp.type=LogAppendTime``: the timestamp-type bit,
    maxTimestamp, and the CRC (those fields are covered by it)."""
    pos = header.position
    struct.pack_into(">h", buf, pos + 21, header.attributes | ATTR_TIMESTAMP_TYPE)
    _MAX_TIMESTAMP.pack_into(buf, pos + 35, timestamp_ms)
    crc = crc32c.crc32c(memoryview(buf)[pos + 21 : pos + header.size])
    struct.pack_into(">I", buf, pos + 17, crc)


def read_offset_and_size(buf, position: int) -> tuple[int, int]:
    """(baseOffset, total size) of the batch at ``position``: the cheap part of a scan."""
    base_offset, length = _OFFSET_AND_LENGTH.unpack_from(buf, position)
    return base_offset, length + LOG_OVERHEAD


def read_last_offset(buf, position: int) -> int:
    base_offset = _BASE_OFFSET.unpack_from(buf, position)[0]
    return base_offset + _LAST_OFFSET_DELTA.unpack_from(buf, position + 23)[0]


# ---------------------------------------------------------------------------------------------
# Building batches: used for control records (transaction markers) and by tests.


def _varint(value: int) -> bytes:
    # zig-zag encoding, as in the Kafka record format
    return encode_uvarint((value << 1) ^ (value >> 63))


def encode_uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]] = (),
) -> bytes:
    body = bytearray(b"\x00")  # attributes
    body += _varint(timestamp_delta)
    body += _varint(offset_delta)
    for blob in (key, value):
        if blob is None:
            body += _varint(-1)
        else:
            body += _varint(len(blob)) + blob
    body += _varint(len(headers))
    for name, hvalue in headers:
        encoded = name.encode()
        body += _varint(len(encoded)) + encoded
        body += _varint(-1) if hvalue is None else _varint(len(hvalue)) + hvalue
    return _varint(len(body)) + bytes(body)


def build_batch(
    records: list[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    timestamp_ms: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    attributes: int = 0,
) -> bytes:
    """Encode an uncompressed magic-v2 batch (for control records and tests)."""
    body = b"".join(encode_record(i, 0, k, v) for i, (k, v) in enumerate(records))
    count = len(records)
    tail = struct.pack(
        ">hiqqqhii", attributes, count - 1, timestamp_ms, timestamp_ms, producer_id,
        producer_epoch, base_sequence, count,
    ) + body
    crc = crc32c.crc32c(tail)
    return struct.pack(">qiibI", base_offset, len(tail) + 9, 0, MAGIC_V2, crc) + tail


def _read_varint(buf, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), pos


def iter_records(batch: bytes | memoryview):
    """Yield (offset, timestamp, key, value) of a batch, decompressing it if needed (internal
    topics, control records, the log cleaner; never on the produce/fetch hot path)."""
    header = parse_header(batch, 0)
    if header.compression:
        batch = decompress_records(header.compression, memoryview(batch)[HEADER_SIZE : header.size])
        pos = 0
    else:
        pos = HEADER_SIZE
    for _ in range(header.record_count):
        length, pos = _read_varint(batch, pos)
        end = pos + length
        pos += 1  # attributes
        ts_delta, pos = _read_varint(batch, pos)
        off_delta, pos = _read_varint(batch, pos)
        klen, pos = _read_varint(batch, pos)
        key = None if klen < 0 else bytes(batch[pos : pos + klen])
        pos += max(klen, 0)
        vlen, pos = _read_varint(batch, pos)
        value = None if vlen < 0 else bytes(batch[pos : pos + vlen])
        pos = end  # skip headers
        yield header.base_offset + off_delta, header.base_timestamp + ts_delta, key, value


def iter_records_raw(batch: bytes | memoryview):
    """Yield (offset, timestamp, key, value, attributes, rest) of every record of a batch
    (decompressed if needed); ``rest`` is the record's bytes after its offset delta (key, value
    and headers as written), so a record can be re-encoded with new deltas and nothing else
    changed (:func:`encode_raw_record`)."""
    header = parse_header(batch, 0)
    if header.compression:
        body = decompress_records(header.compression, memoryview(batch)[HEADER_SIZE : header.size])
        pos = 0
    else:
        body, pos = batch, HEADER_SIZE
    for _ in range(header.record_count):
        length, pos = _read_varint(body, pos)
        end = pos + length
        attributes = body[pos]
        ts_delta, pos = _read_varint(body, pos + 1)
        off_delta, pos = _read_varint(body, pos)
        rest = bytes(body[pos:end])
        klen, p = _read_varint(body, pos)
        key = None if klen < 0 else bytes(body[p : p + klen])
        p += max(klen, 0)
        vlen, p = _read_varint(body, p)
        value = None if vlen < 0 else bytes(body[p : p + vlen])
        yield header.base_offset + off_delta, header.base_timestamp + ts_delta, key, value, attributes, rest
        pos = end


def encode_raw_record(offset_delta: int, timestamp_delta: int, attributes: int, rest: bytes) -> bytes:
    inner = bytes([attributes]) + _varint(timestamp_delta) + _varint(offset_delta) + rest
    return _varint(len(inner)) + inner


COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD = 0, 1, 2, 3, 4
_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def decompress_records(codec: int, data) -> bytes:
    """The records section of a compressed batch, decompressed. Only ListOffsets by timestamp
    needs this (one batch per lookup), so cramjam is imported on first use."""
    import cramjam

    data = bytes(data)
    if codec == COMPRESSION_GZIP:
        return bytes(cramjam.gzip.decompress(data))
    if codec == COMPRESSION_SNAPPY:
        # The Java client and librdkafka write xerial-framed snappy: a 16-byte header, then
        # (int32 length, raw snappy block) chunks.
        if data[:8] == _XERIAL_MAGIC:
            out = bytearray()
            pos = 16
            while pos + 4 <= len(data):
                (size,) = struct.unpack_from(">i", data, pos)
                pos += 4
                out += bytes(cramjam.snappy.decompress_raw(data[pos : pos + size]))
                pos += size
            return bytes(out)
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == COMPRESSION_LZ4:
        return bytes(cramjam.lz4.decompress(data))
    if codec == COMPRESSION_ZSTD:
        return bytes(cramjam.zstd.decompress(data))
    raise InvalidBatch(f"unknown compression codec {codec}", corrupt=False)


def iter_offsets_and_timestamps(batch: bytes | memoryview):
    """Yield (offset, timestamp) of every record of one batch, compressed or not, in offset
    order. LogAppendTime batches: every record has the batch's max timestamp (as Kafka's
    DefaultRecord.timestamp() answers). Reads only each record's length, timestamp delta and
    offset delta."""
    header = parse_header(batch, 0)
    log_append = bool(header.attributes & ATTR_TIMESTAMP_TYPE)
    if header.compression:
        body = decompress_records(header.compression, memoryview(batch)[HEADER_SIZE : header.size])
        pos = 0
    else:
        body = batch
        pos = HEADER_SIZE
    for _ in range(header.record_count):
        length, pos = _read_varint(body, pos)
        end = pos + length
        pos += 1  # attributes
        ts_delta, pos = _read_varint(body, pos)
        off_delta, pos = _read_varint(body, pos)
        ts = header.max_timestamp if log_append else header.base_timestamp + ts_delta
        yield header.base_offset + off_delta, ts
        pos = end


# ---------------------------------------------------------------------------------------------
# Control records (transaction markers). Key: int16 version (0), int16 type (0 abort, 1 commit).
# Value (EndTxnMarker): int16 version (0), int32 coordinator_epoch. kio's schemas lack the
# leading version fields Kafka writes, so these are encoded here.

CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def build_control_batch(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                        timestamp_ms: int) -> bytes:
    key = struct.pack(">hh", 0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return build_batch([(key, value)], timestamp_ms=timestamp_ms, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
                       attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL)


def control_type(batch: bytes | memoryview) -> int:
    """CONTROL_COMMIT or CONTROL_ABORT of a control batch (its single record's key)."""
    for _, _, key, _ in iter_records(batch):
        return struct.unpack_from(">hh", key)[1]
    raise ValueError("control batch without a record")


# ---------------------------------------------------------------------------------------------
# Record-level validation and recompression: only for topics whose configs ask for it
# (cleanup.policy=compact, timestamp bounds beyond what the header shows, compression.type).

CODEC_NAMES = {"uncompressed": COMPRESSION_NONE, "gzip": COMPRESSION_GZIP, "snappy": COMPRESSION_SNAPPY,
               "lz4": COMPRESSION_LZ4, "zstd": COMPRESSION_ZSTD}


def records_section(batch) -> bytes | memoryview:
    """The records of one batch, decompressed when needed (the bytes after the header)."""
    header = parse_header(batch, 0)
    body = memoryview(batch)[HEADER_SIZE : header.size]
    return decompress_records(header.compression, body) if header.compression else body


def iter_record_meta(batch):
    """Yield (index, timestamp, has_key) of every record of one batch, compressed or not.
    LogAppendTime batches: every record has the batch's max timestamp (as Kafka's
    DefaultRecord.timestamp() answers)."""
    header = parse_header(batch, 0)
    log_append = bool(header.attributes & ATTR_TIMESTAMP_TYPE)
    body = records_section(batch)
    pos = 0
    for index in range(header.record_count):
        length, pos = _read_varint(body, pos)
        end = pos + length
        pos += 1  # attributes
        ts_delta, pos = _read_varint(body, pos)
        _, pos = _read_varint(body, pos)  # offset delta
        klen, pos = _read_varint(body, pos)
        yield index, header.max_timestamp if log_append else header.base_timestamp + ts_delta, klen >= 0
        pos = end


def compress_records(codec: int, data, level: int | None = None) -> bytes:
    """Compress a records section as the Java client and librdkafka write it: gzip; xerial-framed
    snappy; an LZ4 frame with independent blocks (Kafka's Java reader refuses linked blocks);
    zstd. ``level`` as Kafka's compression.*.level (None or -1: the codec's default)."""
    import cramjam

    data = bytes(data)
    if codec == COMPRESSION_NONE:
        return data
    if codec == COMPRESSION_GZIP:
        return bytes(cramjam.gzip.compress(data, level=None if level in (None, -1) else level))
    if codec == COMPRESSION_SNAPPY:
        out = bytearray(_XERIAL_MAGIC + struct.pack(">ii", 1, 1))
        for i in range(0, len(data), 32 * 1024):
            chunk = bytes(cramjam.snappy.compress_raw(data[i : i + 32 * 1024]))
            out += struct.pack(">i", len(chunk)) + chunk
        return bytes(out)
    if codec == COMPRESSION_LZ4:
        return _lz4_frame(data, 9 if level is None else level)
    if codec == COMPRESSION_ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3 if level is None else level))
    raise ValueError(f"unknown compression codec {codec}")


_LZ4_MAGIC = 0x184D2204
_LZ4_FLG = 0x60  # version 01, independent blocks, no block or content checksum, no content size
_LZ4_BD = 0x40   # 64 KiB blocks
_LZ4_BLOCK = 64 * 1024


def _lz4_frame(data: bytes, level: int) -> bytes:
    import cramjam

    descriptor = bytes([_LZ4_FLG, _LZ4_BD])
    out = bytearray(struct.pack("<I", _LZ4_MAGIC) + descriptor + bytes([(xxh32(descriptor) >> 8) & 0xFF]))
    for i in range(0, len(data), _LZ4_BLOCK):
        chunk = data[i : i + _LZ4_BLOCK]
        packed = bytes(cramjam.lz4.compress_block(chunk, mode="high_compression", compression=level,
                                                  store_size=False))
        if len(packed) < len(chunk):
            out += struct.pack("<I", len(packed)) + packed
        else:  # incompressible: stored, flagged by the high bit
            out += struct.pack("<I", len(chunk) | 0x80000000) + chunk
    out += b"\x00\x00\x00\x00"  # end mark
    return bytes(out)


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 (for the LZ4 frame descriptor checksum)."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & mask

    n, i = len(data), 0
    if n >= 16:
        v = [(seed + p1 + p2) & mask, (seed + p2) & mask, seed & mask, (seed - p1) & mask]
        while i + 16 <= n:
            for j in range(4):
                lane = struct.unpack_from("<I", data, i + 4 * j)[0]
                v[j] = (rotl((v[j] + lane * p2) & mask, 13) * p1) & mask
            i += 16
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & mask
    else:
        h = (seed + p5) & mask
    h = (h + n) & mask
    while i + 4 <= n:
        h = (rotl((h + struct.unpack_from("<I", data, i)[0] * p3) & mask, 17) * p4) & mask
        i += 4
    while i < n:
        h = (rotl((h + data[i] * p5) & mask, 11) * p1) & mask
        i += 1
    h ^= h >> 15
    h = (h * p2) & mask
    h ^= h >> 13
    h = (h * p3) & mask
    h ^= h >> 16
    return h


def recompress_batch(batch, codec: int, level: int | None = None) -> bytes:
    """The same batch (offsets, timestamps, producer fields, records) with its records section
    compressed with ``codec`` (COMPRESSION_NONE: decompressed): new attributes, length and CRC."""
    header = parse_header(batch, 0)
    body = compress_records(codec, records_section(batch), level)
    tail = bytearray(memoryview(batch)[21:HEADER_SIZE])
    struct.pack_into(">h", tail, 0, (header.attributes & ~ATTR_COMPRESSION_MASK) | codec)
    tail += body
    return struct.pack(">qiibI", header.base_offset, len(tail) + 9, header.partition_leader_epoch, MAGIC_V2,
                       crc32c.crc32c(tail)) + bytes(tail)
