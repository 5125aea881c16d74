"""CRC-valid record batches that Kafka refuses: the reproducers of the record-validation work, and the
decompression bomb of item 4. Shared by the unit tests (tests/protocol/test_records_validation.py),
the real-broker tests (tests/e2e/test_record_validation.py) and the fuzz seeds.

Each builder returns the bytes of one batch as a producer would send it (base offset 0, a valid
CRC32C over attributes..end), so only the records inside are wrong.
"""

from __future__ import annotations

import gzip
import os
import random
import struct

import crc32c

from oncelog.protocol import records as rb

INT32_MAX = 2**31 - 1


def raw_batch(body: bytes, *, count: int, last_offset_delta: int | None = None, attributes: int = 0,
              timestamp_ms: int | None = None, producer_id: int = -1, producer_epoch: int = -1,
              base_sequence: int = -1) -> bytes:
    """A magic-v2 batch around ``body`` (the records section as sent: compressed or not) with a
    correct length and CRC and whatever header fields the caller asks for."""
    ts = int(1000 * __import__("time").time()) if timestamp_ms is None else timestamp_ms
    delta = count - 1 if last_offset_delta is None else last_offset_delta
    tail = struct.pack(">hiqqqhii", attributes, delta, ts, ts, producer_id, producer_epoch, base_sequence,
                       count) + body
    return struct.pack(">qiibI", 0, len(tail) + 9, 0, rb.MAGIC_V2, crc32c.crc32c(tail)) + tail


def record(offset_delta: int, value: bytes = b"v", key: bytes | None = b"k", headers=()) -> bytes:
    return rb.encode_record(offset_delta, 0, key, value, list(headers))


def valid(n: int = 3, **kwargs) -> bytes:
    return raw_batch(b"".join(record(i, b"value-%d" % i) for i in range(n)), count=n, **kwargs)


def random_records(seed: int = 1) -> bytes:
    """Random bytes as the records section of a 3-record batch."""
    return raw_batch(random.Random(seed).randbytes(200), count=3)


def lying_length() -> bytes:
    """A record whose length varint says 200 bytes more than it holds (then a second record)."""
    first = record(0)
    lying = rb._varint(len(first) - 1 + 200) + first[1:]  # the encoded length is one byte here
    return raw_batch(lying + record(1), count=2)


def short_length() -> bytes:
    """A record whose length varint says 3 bytes less than its fields take."""
    first = record(0, b"abcdef")
    return raw_batch(rb._varint(len(first) - 1 - 3) + first[1:] + record(1), count=2)


def gzip_random(seed: int = 2) -> bytes:
    """The gzip attribute over random bytes."""
    return raw_batch(random.Random(seed).randbytes(300), count=3, attributes=rb.COMPRESSION_GZIP)


def gzip_of(body: bytes, count: int) -> bytes:
    return raw_batch(gzip.compress(body), count=count, attributes=rb.COMPRESSION_GZIP)


def unknown_codec(codec: int) -> bytes:
    """Compression codec 5, 6 or 7 (the records themselves uncompressed and valid)."""
    return raw_batch(b"".join(record(i) for i in range(3)), count=3, attributes=codec)


def offset_deltas(deltas=(0, -1, -1000)) -> bytes:
    """Records whose offset deltas are not 0..n-1."""
    return raw_batch(b"".join(record(d, b"value-%d" % i) for i, d in enumerate(deltas)), count=len(deltas))


def count_lies(count: int) -> bytes:
    """recordCount (and lastOffsetDelta = count - 1) of ``count`` holding one record: 1000, or
    2^31 - 1, the batch that moved the log end offset by 2^31."""
    return raw_batch(record(0), count=count)


def trailing_bytes() -> bytes:
    return raw_batch(record(0) + record(1) + b"\x00\x00", count=2)


def negative_header_count() -> bytes:
    rec = bytearray(record(0, key=None))
    rec[-1] = 0x01  # header count varint 0 -> -1
    return raw_batch(bytes(rec), count=1)


def null_header_key() -> bytes:
    body = b"\x00" + rb._varint(0) + rb._varint(0) + rb._varint(-1) + rb._varint(1) + b"v" + rb._varint(1) \
        + rb._varint(-1) + rb._varint(-1)
    return raw_batch(rb._varint(len(body)) + body, count=1)


def varint_too_long() -> bytes:
    body = b"\x00" + b"\x80" * 11 + b"\x00"  # a timestamp delta of 12 bytes
    return raw_batch(rb._varint(len(body)) + body, count=1)


def zstd_bomb(gib: float = 1.0) -> bytes:
    """A zstd batch whose records section decompresses to ``gib`` GiB of zeros (~32 KiB for 1
    GiB): built by streaming, so the test itself never holds the decompressed bytes."""
    import zstandard

    co = zstandard.ZstdCompressor(level=3).compressobj()
    chunk = bytes(1 << 20)
    parts = [co.compress(chunk) for _ in range(int(gib * 1024))]
    parts.append(co.flush())
    return raw_batch(b"".join(parts), count=1000, attributes=rb.COMPRESSION_ZSTD)


# name -> (builder, error code name Kafka-style, what the message says)
REPRODUCERS = {
    "random records": (random_records, "invalid_record"),
    "lying record length": (lying_length, "invalid_record"),
    "gzip random payload": (gzip_random, "invalid_record"),
    "codec 5": (lambda: unknown_codec(5), "invalid_record"),
    "codec 6": (lambda: unknown_codec(6), "invalid_record"),
    "codec 7": (lambda: unknown_codec(7), "invalid_record"),
    "offset deltas 0 -1 -1000": (offset_deltas, "invalid_record"),
    "record count 1000 holding one": (lambda: count_lies(1000), "invalid_record"),
    "record count 2^31-1 holding one": (lambda: count_lies(INT32_MAX), "invalid_record"),
}


def seed_dir_batches() -> dict[str, bytes]:
    """Every builder's batch by file name (fuzz seeds)."""
    out = {name.replace(" ", "_").replace("^", "").replace("-", "m"): build() for name, (build, _) in
           REPRODUCERS.items()}
    out.update(trailing=trailing_bytes(), short_length=short_length(), negative_headers=negative_header_count(),
               null_header_key=null_header_key(), varint_too_long=varint_too_long(), valid=valid(),
               valid_gzip=gzip_of(b"".join(record(i) for i in range(4)), 4))
    return out


if __name__ == "__main__":  # pragma: no cover - writes the seeds of tests/fuzz/corpus/batches
    target = os.path.join(os.path.dirname(__file__), "fuzz", "corpus", "batches")
    os.makedirs(target, exist_ok=True)
    for name, data in seed_dir_batches().items():
        with open(os.path.join(target, f"bad-{name}"), "wb") as f:
            f.write(data)
