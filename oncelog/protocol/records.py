"""Kafka record batches (magic v2): the header scan, record validation, bounded decompression.

A produce request's ``records`` field is a concatenation of record batches; each batch starts
with a fixed 61-byte header::

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
length that fits the buffer, a known codec (0-4), ``recordCount >= 1`` and
``lastOffsetDelta == recordCount - 1`` (what every producer writes). A client's batch accepted
by :func:`check_records` also holds exactly ``recordCount`` well-formed records with offset
deltas 0..n-1, decompressing (if compressed) to at most :func:`decompressed_limit` bytes — so
the broker never stores what a consumer cannot read. Because the CRC covers neither
``baseOffset`` nor ``partitionLeaderEpoch``, the broker can assign offsets by patching those
bytes without recomputing the checksum.

Every decompression here is bounded (:func:`decompress_view`): nothing is materialised beyond
the limit + 1 bytes, whatever a batch claims.
"""

from __future__ import annotations

import functools
import mmap
import struct
import threading
from dataclasses import dataclass


def crc32c(data) -> int:
    """CRC-32C (Castagnoli) of ``data``, by the C-backed ``crc32c`` package, imported on first use:
    its ``__init__`` asks ``importlib.metadata`` for its own version, which walks ``sys.path``, and
    in a Spark Python worker that holds Spark's jar, read entry by entry (~0.1 s of CPU in every
    worker process that imports the client; most of them never compute a CRC)."""
    global crc32c
    from crc32c import crc32c as implementation

    crc32c = implementation  # later calls go straight to the C function
    return implementation(data)


# numpy (a core dependency) is imported by the first batch large enough to be walked in bulk
# (_numpy_ready): importing it costs ~0.13 s of CPU, a fifth of a broker process's start, and most
# processes that import this module (a test's short-lived broker, a Spark worker) never walk one.
np = None

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted by batchLength
MAGIC_V2 = 2

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD = 0, 1, 2, 3, 4

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

_BASE_OFFSET = struct.Struct(">q")
_BATCH_START = struct.Struct(">qii")  # base offset, batch length, partition leader epoch
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_MAX_TIMESTAMP = struct.Struct(">q")


class InvalidBatch(ValueError):
    """A record batch failed header validation; ``reason`` names what was wrong."""

    def __init__(self, reason: str, *, corrupt: bool = True, record_errors: tuple = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        # corrupt=True maps to CORRUPT_MESSAGE, False to INVALID_RECORD.
        self.corrupt = corrupt
        # KIP-467: (index of the record in its batch, message) where Kafka names the record.
        self.record_errors = record_errors


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
            actual = crc32c(view[pos + 21 : pos + header.size])
            if actual != header.crc:
                raise InvalidBatch(
                    f"CRC mismatch at byte {pos}: header says {header.crc:#010x}, data gives {actual:#010x}"
                )
        if header.attributes & ATTR_COMPRESSION_MASK > COMPRESSION_ZSTD:
            # Kafka's CompressionType.forId
            raise InvalidBatch(f"Unknown compression type id: {header.attributes & ATTR_COMPRESSION_MASK}",
                               corrupt=False)
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


def pack_batch_start(base_offset: int, header: "BatchHeader", partition_leader_epoch: int) -> bytes:
    """The first 16 bytes of a stored batch: the broker-assigned base offset, the batch's length
    and the leader's epoch, which the leader stamps on every batch it appends (Kafka's
    MemoryRecords.setPartitionLeaderEpoch; neither is covered by the CRC)."""
    return _BATCH_START.pack(base_offset, header.size - LOG_OVERHEAD, partition_leader_epoch)


def set_log_append_time(buf: bytearray, header: BatchHeader, timestamp_ms: int) -> None:
    """Rewrite a batch for ``message.timestamp.type=LogAppendTime``: the timestamp-type bit,
    maxTimestamp, and the CRC (those fields are covered by it)."""
    pos = header.position
    struct.pack_into(">h", buf, pos + 21, header.attributes | ATTR_TIMESTAMP_TYPE)
    _MAX_TIMESTAMP.pack_into(buf, pos + 35, timestamp_ms)
    crc = crc32c(memoryview(buf)[pos + 21 : pos + header.size])
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
    crc = crc32c(tail)
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


def iter_records(batch: bytes | memoryview, limit: int | None = None):
    """Yield (offset, timestamp, key, value) of a batch, decompressing it if needed (internal
    topics, control records, the log cleaner; never on the produce/fetch hot path). ``limit``:
    the decompressed size allowed (:func:`decompress_view`), by default the default topic's."""
    header = parse_header(batch, 0)
    if header.compression:
        batch = decompress_records(header.compression, memoryview(batch)[HEADER_SIZE : header.size],
                                   DEFAULT_DECOMPRESSED_LIMIT if limit is None else limit)
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


def iter_records_raw(batch: bytes | memoryview, limit: int | None = None):
    """Yield (offset, timestamp, key, value, attributes, rest) of every record of a batch
    (decompressed if needed, within ``limit`` as :func:`iter_records`); ``rest`` is the record's
    bytes after its offset delta (key, value and headers as written), so a record can be
    re-encoded with new deltas and nothing else changed (:func:`encode_raw_record`)."""
    header = parse_header(batch, 0)
    if header.compression:
        body = decompress_records(header.compression, memoryview(batch)[HEADER_SIZE : header.size],
                                  DEFAULT_DECOMPRESSED_LIMIT if limit is None else limit)
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


_XERIAL_MAGIC = b"\x82SNAPPY\x00"

# ---------------------------------------------------------------------------------------------
# Bounded decompression. Kafka streams a compressed batch record by record and never holds it
# whole; here a batch is decompressed into one buffer, so its size is capped instead: a batch
# whose records decompress to more than the cap is refused (Produce: MESSAGE_TOO_LARGE) and never
# materialised beyond cap + 1 bytes (cramjam's ``*_into`` functions stop when the output buffer is
# full; snappy blocks carry their length up front). The cap is min(64 x the topic's
# max.message.bytes, 256 MiB): 64 MiB with the default max.message.bytes, which is 64 times what
# an uncompressed batch may be, and less than librdkafka's default receive.message.max.bytes
# (100,000,000), the most a default librdkafka consumer accepts for a decompressed batch.

DECOMPRESSION_RATIO = 64
DECOMPRESSED_LIMIT_MAX = 256 * 1024 * 1024
DEFAULT_MAX_MESSAGE_BYTES = 1048588  # Kafka's message.max.bytes default


def decompressed_limit(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> int:
    """The most bytes a batch's records may decompress to, for a topic's ``max.message.bytes``."""
    return max(min(DECOMPRESSION_RATIO * max_message_bytes, DECOMPRESSED_LIMIT_MAX), 0)


DEFAULT_DECOMPRESSED_LIMIT = decompressed_limit()


class RecordsTooLarge(InvalidBatch):
    """A compressed batch whose records decompress to more than the limit (Produce:
    MESSAGE_TOO_LARGE, not INVALID_RECORD: a Java producer then splits the batch and retries)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the records of a compressed batch decompress to more than {limit} bytes (the limit: "
                         f"min({DECOMPRESSION_RATIO} x max.message.bytes, {DECOMPRESSED_LIMIT_MAX} bytes))",
                         corrupt=False)
        self.limit = limit


_SCRATCH_KEEP = 8 * 1024 * 1024  # a per-thread output buffer up to this size is kept for the next batch


class _Scratch(threading.local):
    buf: bytearray | None = None


_scratch = _Scratch()


def _decompress_into(codec: int, data, out) -> int:
    """Decompress ``data`` into ``out``; the number of bytes written. Raises
    cramjam.DecompressionError (also when ``out`` is too small) or InvalidBatch."""
    import cramjam

    if codec == COMPRESSION_GZIP:
        return cramjam.gzip.decompress_into(data, out)
    if codec == COMPRESSION_LZ4:
        return cramjam.lz4.decompress_into(data, out)
    if codec == COMPRESSION_ZSTD:
        return cramjam.zstd.decompress_into(data, out)
    raise InvalidBatch(f"Unknown compression type id: {codec}", corrupt=False)


def _snappy_blocks(data) -> list:
    """The raw snappy blocks of a snappy records section: xerial-framed (what the Java client
    and librdkafka write: a 16-byte header, then (int32 length, raw block) chunks) or one raw
    block."""
    if bytes(data[:8]) != _XERIAL_MAGIC:
        return [data]
    blocks = []
    pos, end = 16, len(data)
    if end < 16:
        raise InvalidBatch("truncated xerial snappy header", corrupt=False)
    while pos < end:
        if end - pos < 4:
            raise InvalidBatch("truncated xerial snappy chunk length", corrupt=False)
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise InvalidBatch(f"xerial snappy chunk of {size} bytes overruns the records", corrupt=False)
        blocks.append(data[pos : pos + size])
        pos += size
    return blocks


def decompress_view(codec: int, data, limit: int = DEFAULT_DECOMPRESSED_LIMIT):
    """The records section ``data`` of a batch compressed with ``codec``, decompressed, as a
    buffer of exactly its length. Never materialises more than ``limit`` + 1 bytes: raises
    :class:`RecordsTooLarge` beyond ``limit``, :class:`InvalidBatch` (INVALID_RECORD) when the
    payload does not decompress or the codec is unknown. The result may be this thread's
    reused scratch buffer: valid until the next call on the same thread (copy it to keep it)."""
    import cramjam

    if codec == COMPRESSION_NONE:
        return memoryview(data)
    try:
        if codec == COMPRESSION_SNAPPY:
            blocks = _snappy_blocks(memoryview(data))
            sizes = [cramjam.snappy.decompress_raw_len(bytes(b)) for b in blocks]
            total = sum(sizes)
            if total > limit:
                raise RecordsTooLarge(limit)
            out = bytearray(total)
            pos = 0
            view = memoryview(out)
            for block, size in zip(blocks, sizes):
                if cramjam.snappy.decompress_raw_into(bytes(block), view[pos : pos + size]) != size:
                    raise InvalidBatch("snappy block shorter than its declared length", corrupt=False)
                pos += size
            return view
        if codec not in (COMPRESSION_GZIP, COMPRESSION_LZ4, COMPRESSION_ZSTD):
            raise InvalidBatch(f"Unknown compression type id: {codec}", corrupt=False)
        # First into this thread's scratch buffer (no allocation on the hot path); a batch that
        # does not fit is decompressed again into an anonymous mapping of limit + 1 bytes, whose
        # untouched pages cost nothing and which is unmapped afterwards.
        scratch = _scratch.buf
        if scratch is None:
            scratch = _scratch.buf = bytearray(1 << 20)
        if len(scratch) > limit:
            scratch_view = memoryview(scratch)[: limit + 1]
        else:
            scratch_view = memoryview(scratch)
        try:
            n = _decompress_into(codec, data, scratch_view)
        except cramjam.DecompressionError as exc:
            if "failed to write whole buffer" not in str(exc):
                raise
        else:
            if n > limit:
                raise RecordsTooLarge(limit)
            return scratch_view[:n]
        if len(scratch_view) > limit:
            raise RecordsTooLarge(limit)
        big = mmap.mmap(-1, limit + 1)
        try:
            n = _decompress_into(codec, data, big)
        except cramjam.DecompressionError as exc:
            big.close()
            if "failed to write whole buffer" in str(exc):
                raise RecordsTooLarge(limit) from None
            raise
        if n > limit:
            big.close()
            raise RecordsTooLarge(limit)
        if n < _SCRATCH_KEEP:
            # Keep a scratch buffer this size for the next batches (the producer's batches are alike).
            _scratch.buf = scratch = bytearray(min(1 << (n + 1).bit_length(), _SCRATCH_KEEP))
            scratch[:n] = big[:n]
            big.close()
            return memoryview(scratch)[:n]
        out = bytearray(big[:n])
        big.close()
        return memoryview(out)
    except cramjam.DecompressionError as exc:
        raise InvalidBatch(f"Failed to decompress record stream: {exc}", corrupt=False) from None


def decompress_records(codec: int, data, limit: int = DEFAULT_DECOMPRESSED_LIMIT) -> bytes:
    """The records section of a compressed batch, decompressed (a copy: see
    :func:`decompress_view` for the limit and the errors)."""
    return bytes(decompress_view(codec, data, limit))


# ---------------------------------------------------------------------------------------------
# Record validation: every record of a client's batch, as Kafka's LogValidator reads them through
# DefaultRecordBatch's iterator and DefaultRecord.readFrom, with their exception messages. A
# record is: varint length, int8 attributes, varlong timestamp delta, varint offset delta, varint
# key length (-1: null) and key, varint value length and value, varint header count, and per
# header a varint key length (>= 0) and key, a varint value length and value. Varints are
# zig-zag LEB128, at most 5 bytes (varlong 10), as Kafka's ByteUtils reads them.


class _Malformed(Exception):
    """A varint longer than Kafka reads, or a value out of its range (never escapes this module)."""


def _uvarint(b, p: int, max_bytes: int) -> tuple[int, int]:
    """(raw unsigned value, next position) of the varint at ``p``, at most ``max_bytes`` long."""
    u = shift = 0
    for q in range(p, p + max_bytes):
        x = b[q]
        u |= (x & 0x7F) << shift
        if x < 0x80:
            return u, q + 1
        shift += 7
    raise _Malformed


def _svarint(b, p: int) -> tuple[int, int]:
    """(int32 value, next position) of the zig-zag varint at ``p`` (slow path: 2+ bytes)."""
    u, p = _uvarint(b, p, 5)
    if u > 0xFFFFFFFF:
        raise _Malformed
    return (u >> 1) ^ -(u & 1), p


def _header_fields(b, p: int, end: int, count: int) -> int:
    """Skip ``count`` record headers from ``p``; the position after them."""
    if count < 0:
        raise InvalidBatch(f"Found invalid number of record headers {count}", corrupt=False)
    if count > end - p:
        raise InvalidBatch(f"Found invalid number of record headers. {count} is larger than the remaining size "
                           "of the buffer", corrupt=False)
    for _ in range(count):
        size, p = _svarint(b, p)
        if size < 0:
            raise InvalidBatch(f"Invalid negative header key size {size}", corrupt=False)
        try:
            # A header key is a String in Kafka's record format. Java decodes a bad one with
            # replacement characters; Python consumers (kafka-python, aiokafka) fail on the whole
            # batch: refused here, stricter than Kafka.
            str(b[p : p + size], "utf-8")
        except UnicodeDecodeError:
            raise InvalidBatch("Invalid header key: not UTF-8", corrupt=False) from None
        p += size
        size, p = _svarint(b, p)
        if size >= 0:
            p += size
        elif size != -1:
            raise _Malformed
    return p


def walk_records(b, pos: int, end: int, count: int, metas: list | None = None) -> None:
    """Read the ``count`` records that must exactly fill ``b[pos:end]`` (an uncompressed records
    section), checking what Kafka's DefaultRecord.readFrom checks: every length consistent, the
    record's fields ending exactly at its declared size, header count and key sizes, no short
    read and no trailing bytes. Also that the offset deltas are 0..count-1 (Kafka refused
    anything else before 2.4; a consumer computes offsets from them). ``metas``: if given,
    (timestamp delta, has key) of every record is appended to it.

    Raises :class:`InvalidBatch` (INVALID_RECORD): Kafka throws InvalidRecordException for all of
    them. Lengths below -1 (null) are refused too, where Kafka reads any negative length as null.

    The hot path of every Produce: written for CPython's speed, one loop with the one- and two-byte
    varints (every length below 8 KiB, every offset delta below 8192) decoded inline.
    """
    i = 0
    try:
        while i < count:
            if pos >= end:
                raise InvalidBatch("Incorrect declared batch size, premature EOF reached", corrupt=False)
            x = b[pos]
            if x < 0x80:
                size = (x >> 1) ^ -(x & 1)
                p = pos + 1
            else:
                size, p = _svarint(b, pos)
            start = p
            rend = p + size
            if rend > end:
                raise InvalidBatch(f"Invalid record size: expected {size} bytes in record payload, but instead the "
                                   f"buffer has only {end - p} remaining bytes.", corrupt=False)
            # attributes (unused in v2; kafka-python reads the byte as a varint, so one with its
            # high bit set shifts every field after it: refused, stricter than Kafka), then the
            # timestamp delta (varlong)
            if b[p] & 0x80:
                raise InvalidBatch(f"Invalid record attributes {b[p]:#04x}", corrupt=False)
            x = b[p + 1]
            if x < 0x80:
                ts_delta = x
                p += 2
            else:
                ts_delta, p = _uvarint(b, p + 1, 10)
                if ts_delta > 0xFFFFFFFFFFFFFFFF:
                    raise _Malformed
            # offset delta: zig-zag(i) is 2i, one byte below 64, two below 8192
            x = b[p]
            twice = i << 1
            if x == twice < 0x80:
                p += 1
            elif x == (twice & 0x7F) | 0x80 and twice < 0x4000 and b[p + 1] == twice >> 7:
                p += 2
            else:
                delta, p = _svarint(b, p)
                if delta != i:
                    # Kafka's words before 2.4 (KAFKA-9080 dropped the check for uncompressed batches;
                    # compressed ones Kafka still rebuilds): a consumer takes offsets from these deltas.
                    text = (f"Inner record {i} of the record batch does not have incremental offsets: offset delta "
                            f"{delta}, expected offset delta is {i}")
                    raise InvalidBatch(text, corrupt=False, record_errors=((i, text),))
            # key
            x = b[p]
            if x < 0x80:
                klen = (x >> 1) ^ -(x & 1)
                p += 1
            else:
                y = b[p + 1]
                if y < 0x80:
                    klen = (((y << 7) | (x & 0x7F)) >> 1) ^ -(x & 1)
                    p += 2
                else:
                    klen, p = _svarint(b, p)
            if klen >= 0:
                p += klen
            elif klen != -1:
                raise _Malformed
            # value
            x = b[p]
            if x < 0x80:
                vlen = (x >> 1) ^ -(x & 1)
                p += 1
            else:
                y = b[p + 1]
                if y < 0x80:
                    vlen = (((y << 7) | (x & 0x7F)) >> 1) ^ -(x & 1)
                    p += 2
                else:
                    vlen, p = _svarint(b, p)
            if vlen >= 0:
                p += vlen
            elif vlen != -1:
                raise _Malformed
            # headers
            x = b[p]
            if x == 0:
                p += 1
            else:
                headers, p = _svarint(b, p)
                p = _header_fields(b, p, end, headers)
            if p != rend:
                raise InvalidBatch(f"Invalid record size: expected to read {size} bytes in record payload, but "
                                   f"instead read {p - start}", corrupt=False)
            if metas is not None:
                metas.append(((ts_delta >> 1) ^ -(ts_delta & 1), klen >= 0))
            pos = rend
            i += 1
    except (IndexError, _Malformed):
        raise InvalidBatch("Found invalid record structure", corrupt=False) from None
    if pos != end:
        raise InvalidBatch("Incorrect declared batch size, records still remaining in file", corrupt=False)


# Large batches are walked in bulk: numpy over the records section, each field of every record
# at once (a few dozen array operations per batch instead of a Python loop per record). Only the
# record starts need a sequential pass, skipped when every record has the same size (what a
# producer of fixed-size values writes). Anything this path does not accept is walked again by
# walk_records, which has the exact error (an invalid batch costs what walk_records costs).
BULK_MIN_RECORDS = 40  # measured crossover: ~36 same-sized records, ~64 of varied sizes (~25-40 µs a batch)
_MIN_RECORD_SIZE = 7  # length, attributes, timestamp delta, offset delta, key, value, header count
_VARINT_SHIFTS: dict = {}
_NUMPY_MISSING = False


def _numpy_ready() -> bool:
    """Import numpy on first use; False if it cannot be (the record walk then stays pure Python)."""
    global np, _VARINT_SHIFTS, _NUMPY_MISSING
    if np is not None:
        return True
    if _NUMPY_MISSING:
        return False
    try:
        import numpy
    except ImportError:  # pragma: no cover
        _NUMPY_MISSING = True
        return False
    _VARINT_SHIFTS = {n: numpy.arange(n, dtype=numpy.int64) * 7 for n in (5, 10)}
    np = numpy  # last: a thread that sees np set sees the shifts too
    return True


def _bulk_varints(a, positions, max_bytes: int):
    """(raw unsigned values as int64, sizes) of the varints at ``positions`` of the uint8 array
    ``a``, or None if one has ``max_bytes`` bytes or more (those, rare, are left to walk_records,
    which checks their range). One- and two-byte varints (every length below 8 KiB) take two
    gathers."""
    first = a.take(positions, mode="clip")
    more = first >= 0x80
    if not more.any():
        return first.astype(np.int64), 1
    second = a.take(positions + 1, mode="clip")
    if not (more & (second >= 0x80)).any():
        values = (first & 0x7F).astype(np.int64) | (second.astype(np.int64) << 7) * more
        return values, 1 + more
    grid = a.take(positions[:, None] + np.arange(max_bytes), mode="clip")
    ends = grid < 0x80
    size = ends.argmax(axis=1) + 1
    if not ends.any(axis=1).all() or (size >= max_bytes).any():
        return None
    used = np.arange(max_bytes) < size[:, None]
    values = (((grid & 0x7F).astype(np.int64) << _VARINT_SHIFTS[max_bytes]) * used).sum(axis=1)
    return values, size


def _zigzag(u):
    return (u >> 1) ^ -(u & 1)


_SHAPE_RECORDS = 8192  # the cached shapes cover batches of up to this many records (sliced)


@functools.lru_cache(maxsize=1)
def _offset_delta_bytes_all():
    twice = np.arange(_SHAPE_RECORDS, dtype=np.int64) * 2
    two = twice >= 0x80
    first = np.where(two, (twice & 0x7F) | 0x80, twice).astype(np.uint8)
    return first, (twice >> 7).astype(np.uint8), two, 1 + two


def _offset_delta_bytes(count: int):
    """The bytes offset deltas 0..count-1 are written as (count <= 8192: one or two bytes each):
    (first bytes, second bytes, which have two, sizes)."""
    return tuple(x[:count] for x in _offset_delta_bytes_all())


@functools.lru_cache(maxsize=64)
def _same_size_shape_all(size0: int):
    index = np.arange(_SHAPE_RECORDS, dtype=np.int64)
    bodies = size0 + (index >= 64)
    twice = bodies * 2
    two = twice >= 0x80
    sizes = 1 + two
    totals = bodies + sizes
    starts = np.zeros(_SHAPE_RECORDS, dtype=np.int64)
    np.cumsum(totals[:-1], out=starts[1:])
    first = np.where(two, (twice & 0x7F) | 0x80, twice).astype(np.uint8)
    return starts, starts + totals, first, (twice >> 7).astype(np.uint8), two, sizes


def _same_size_shape(count: int, size0: int):
    """Where the records of a batch of ``count`` records start, and what their length varints
    are, if each is as large as the first (``size0``) but for its offset delta's varint, which
    grows by a byte at 64 (count <= 8192, records below 8 KiB: one- or two-byte lengths):
    (relative starts, total bytes, record ends, length first bytes, second bytes, which have
    two, length sizes). Cached by record size for 8192 records; a batch takes a prefix (views,
    no copy), so every record count of a producer hits the cache."""
    starts, ends, first, second, two, sizes = _same_size_shape_all(size0)
    return starts[:count], int(ends[count - 1]), ends[:count], first[:count], second[:count], two[:count], sizes[:count]


def _same_varint(a, positions):
    """(value, size) if the varints at ``positions`` are all the same one- or two-byte varint
    (a producer's records of one key size, or one value size), else None."""
    first = a.take(positions, mode="clip")
    x = int(first[0])
    if not (first == x).all():
        return None
    if x < 0x80:
        return (x >> 1) ^ -(x & 1), 1
    second = a.take(positions + 1, mode="clip")
    y = int(second[0])
    if y >= 0x80 or not (second == y).all():
        return None
    u = (y << 7) | (x & 0x7F)
    return (u >> 1) ^ -(u & 1), 2


def _walk_bulk(b, pos: int, end: int, count: int, metas: list | None) -> bool:
    """walk_records for a large batch, in bulk; True if every record is valid (``metas``
    filled), False if anything is off or unusual (headers, 5+-byte varints): the caller then
    walks the batch record by record. Written to make few numpy calls (each costs ~1 µs
    whatever its size): the shapes a batch of same-sized records must have are cached by
    (count, record size), and a field every record has the same is checked as one value."""
    if not _numpy_ready():
        return False
    if count > (end - pos) // _MIN_RECORD_SIZE:
        # Never allocate by the declared count (2^31 - 1 would be 16 GiB per array: found by
        # the fuzzer); walk_records stops at the end of the bytes.
        return False
    a = np.frombuffer(b, dtype=np.uint8)
    # 1. Record starts, and each record's length: the same size throughout, or a sequential pass.
    x = int(a[pos]) if pos < end else 0
    if x < 0x80:
        size0 = (x >> 1) ^ -(x & 1)
    elif pos + 1 < end and a[pos + 1] < 0x80:
        u = (int(a[pos + 1]) << 7) | (x & 0x7F)
        size0 = (u >> 1) ^ -(u & 1)
    else:
        return False
    guessed = False
    if 0 < size0 < 8000 and count <= _SHAPE_RECORDS:
        rel, total, rel_ends, len_first, len_second, len_two, len_sizes = _same_size_shape(count, size0)
        if total == end - pos:
            starts = rel + pos
            guessed = ((a.take(starts) == len_first).all()
                       and ((a.take(starts + 1, mode="clip") == len_second) | ~len_two).all())
    if guessed:
        body = starts + len_sizes
        ends = rel_ends + pos
    else:
        body_list, ends_list = [], []
        p = pos
        try:
            for _ in range(count):
                x = b[p]
                if x < 0x80:
                    q = p + 1
                    p = q + ((x >> 1) ^ -(x & 1))
                else:
                    y = b[p + 1]
                    if y >= 0x80:
                        return False
                    q = p + 2
                    p = q + ((((y << 7) | (x & 0x7F)) >> 1) ^ -(x & 1))
                if p <= q or p > end:
                    return False
                body_list.append(q)
                ends_list.append(p)
        except IndexError:
            return False
        if p != end:
            return False
        body = np.array(body_list, dtype=np.int64)
        ends = np.array(ends_list, dtype=np.int64)
    # 2. The fields of every record at once.
    if (a.take(body, mode="clip") & 0x80).any():  # attributes
        return False
    p = body + 1
    ts = a.take(p, mode="clip")  # timestamp delta: one byte each below 64 ms
    if (ts & 0x80).any():
        got = _bulk_varints(a, p, 10)
        if got is None:
            return False
        ts, n = got
        p = p + n
    else:
        p = p + 1
    if count <= _SHAPE_RECORDS:  # offset deltas 0..count-1, as bytes
        od_first, od_second, od_two, od_sizes = _offset_delta_bytes(count)
        if not ((a.take(p, mode="clip") == od_first).all()
                and ((a.take(p + 1, mode="clip") == od_second) | ~od_two).all()):
            return False
        p = p + od_sizes
    else:
        got = _bulk_varints(a, p, 5)
        if got is None or not (_zigzag(got[0]) == np.arange(count)).all():
            return False
        p = p + got[1]
    has_key = None
    for _ in range(2):  # key, then value: one size for all, or each its own
        same = _same_varint(a, p)
        if same is not None:
            size, n = same
            if size < -1:
                return False
            p = p + (n + max(size, 0))
            present = size >= 0
        else:
            got = _bulk_varints(a, p, 5)
            if got is None:
                return False
            sizes = _zigzag(got[0])
            if (sizes < -1).any():
                return False
            p = p + got[1] + np.maximum(sizes, 0)
            present = sizes >= 0
        if has_key is None:
            has_key = present
    if (a.take(p, mode="clip") != 0).any():  # header counts: records with headers take the slow path
        return False
    if not (p + 1 == ends).all():
        return False
    if metas is not None:
        keys = has_key.tolist() if isinstance(has_key, np.ndarray) else [has_key] * count
        metas.extend(zip(_zigzag(ts.astype(np.int64)).tolist(), keys))
    return True


def check_records(buf, header: BatchHeader, *, limit: int = DEFAULT_DECOMPRESSED_LIMIT,
                  metas: list | None = None) -> None:
    """Validate every record of the batch ``header`` of ``buf`` (decompressing it within
    ``limit``): :func:`walk_records`. Raises :class:`InvalidBatch` or :class:`RecordsTooLarge`."""
    start = header.position + HEADER_SIZE
    end = header.position + header.size
    count = header.record_count
    if header.compression == COMPRESSION_NONE:
        body = buf
    else:
        body = decompress_view(header.compression, memoryview(buf)[start:end], limit)
        start, end = 0, len(body)
    if count >= BULK_MIN_RECORDS and _walk_bulk(body, start, end, count, metas):
        return
    if metas:
        metas.clear()
    walk_records(body, start, end, count, metas)


def iter_offsets_and_timestamps(batch: bytes | memoryview, limit: int | None = None):
    """Yield (offset, timestamp) of every record of one batch, compressed or not, in offset
    order. LogAppendTime batches: every record has the batch's max timestamp (as Kafka's
    DefaultRecord.timestamp() answers). Reads only each record's length, timestamp delta and
    offset delta. ``limit``: as :func:`iter_records`."""
    header = parse_header(batch, 0)
    log_append = bool(header.attributes & ATTR_TIMESTAMP_TYPE)
    if header.compression:
        body = decompress_records(header.compression, memoryview(batch)[HEADER_SIZE : header.size],
                                  DEFAULT_DECOMPRESSED_LIMIT if limit is None else limit)
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


def control_marker(batch: bytes | memoryview) -> tuple[int, int]:
    """The one reading of a control batch: (type, coordinator epoch) of its single record. The
    type, CONTROL_COMMIT or CONTROL_ABORT, is its key's (int16 version, int16 type); the epoch
    its value's (EndTxnMarker: int16 version, int32 coordinator epoch), -1 if the value is
    absent or short. ValueError for a batch without a record or a key too short for a type."""
    for _, _, key, value in iter_records(batch):
        if key is None or len(key) < 4:
            raise ValueError("control record without a type")
        epoch = struct.unpack_from(">hi", value)[1] if value is not None and len(value) >= 6 else -1
        return struct.unpack_from(">hh", key)[1], epoch
    raise ValueError("control batch without a record")


def control_type(batch: bytes | memoryview) -> int:
    """CONTROL_COMMIT or CONTROL_ABORT of a control batch (:func:`control_marker`)."""
    return control_marker(batch)[0]


# ---------------------------------------------------------------------------------------------
# Record-level validation and recompression: only for topics whose configs ask for it
# (cleanup.policy=compact, timestamp bounds beyond what the header shows, compression.type).

CODEC_NAMES = {"uncompressed": COMPRESSION_NONE, "gzip": COMPRESSION_GZIP, "snappy": COMPRESSION_SNAPPY,
               "lz4": COMPRESSION_LZ4, "zstd": COMPRESSION_ZSTD}


def records_section(batch, limit: int | None = None) -> bytes | memoryview:
    """The records of one batch, decompressed when needed (the bytes after the header), within
    ``limit`` as :func:`iter_records`."""
    header = parse_header(batch, 0)
    body = memoryview(batch)[HEADER_SIZE : header.size]
    if not header.compression:
        return body
    return decompress_records(header.compression, body, DEFAULT_DECOMPRESSED_LIMIT if limit is None else limit)


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


def recompress_batch(batch, codec: int, level: int | None = None, limit: int | None = None) -> bytes:
    """The same batch (offsets, timestamps, producer fields, records) with its records section
    compressed with ``codec`` (COMPRESSION_NONE: decompressed): new attributes, length and CRC.
    ``limit``: the decompressed size allowed, as :func:`iter_records`."""
    header = parse_header(batch, 0)
    body = compress_records(codec, records_section(batch, limit), level)
    tail = bytearray(memoryview(batch)[21:HEADER_SIZE])
    struct.pack_into(">h", tail, 0, (header.attributes & ~ATTR_COMPRESSION_MASK) | codec)
    tail += body
    return struct.pack(">qiibI", header.base_offset, len(tail) + 9, header.partition_leader_epoch, MAGIC_V2,
                       crc32c(tail)) + bytes(tail)
