"""atheris harness over the record-batch scan and validation: the path every Produce's
records go through before anything is written — :func:`oncelog.partition.validation.scan` (the
headers: length, magic, CRC, codec, counts, control batches) and
:func:`~oncelog.partition.validation.validate` (every record walked, decompressed within the
limit; keys and timestamps against the topic's config), with a default topic config.

Each input is a Produce request's records field. The harness first rewrites the CRC of every
batch whose length is sane, so random mutations reach the record walker instead of stopping at
the checksum (a wrong CRC is tested by the unit tests). The contract:

* anything refused is refused with a domain error (:class:`oncelog.errors.KafkaError`: INVALID_RECORD,
  CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_TIMESTAMP); any other exception is a crash;
* anything accepted is read back the same by a consumer's parser (kafka-python's
  DefaultRecordBatch, a port of Kafka's Java reader): the declared number of records, offsets
  base..base+n-1, the same timestamps and the same keys present; a parser error is a crash.

Seeds: tests/fuzz/corpus/batches (real batches of confluent-kafka, kafka-python and aiokafka in
every codec, and the issue's reproducers: ``python -m tests.fuzz.capture_batches``).

Run::

    .venv/bin/python -m tests.fuzz.fuzz_batches -runs=100000
    .venv/bin/python -m tests.fuzz.fuzz_batches crash-file   # replay one input
"""

from __future__ import annotations

import os
import sys

import atheris

with atheris.instrument_imports(include=["oncelog"]):
    from oncelog import errors
    from oncelog.partition import validation
    from oncelog.protocol import records as rb
    from oncelog.config.settings import LogConfig

import crc32c
from kafka.record.default_records import DefaultRecordBatch

SEEDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "batches")
# A topic whose decompression limit is small (64 x 16 KiB = 1 MiB), so an input that inflates
# costs little; the real limit is tested in tests/protocol/test_records_validation.py.
CONFIG = LogConfig(max_message_bytes=16 * 1024)
NOW_MS = 1_795_644_186_346  # a fixed "now": the seeds' timestamps are within the default bounds


class Disagreement(AssertionError):
    """The validator accepted a batch that a consumer's parser reads differently."""


def consumer_agrees(data: bytes, header: rb.BatchHeader, metas: list) -> None:
    batch = DefaultRecordBatch(bytearray(data[header.position : header.position + header.size]))
    try:
        records = list(batch)
    except Exception as exc:
        raise Disagreement(f"accepted, but kafka-python cannot read it: {type(exc).__name__}: {exc}") from exc
    if len(records) != header.record_count:
        raise Disagreement(f"accepted {header.record_count} records, kafka-python read {len(records)}")
    log_append = bool(header.attributes & rb.ATTR_TIMESTAMP_TYPE)
    for i, (record, (ts_delta, has_key)) in enumerate(zip(records, metas)):
        if record.offset != header.base_offset + i:
            raise Disagreement(f"record {i}: kafka-python reads offset {record.offset}")
        ts = header.max_timestamp if log_append else header.base_timestamp + ts_delta
        # kafka-python keeps Java's long arithmetic out: compare modulo 2^64
        if (record.timestamp - ts) % (1 << 64):
            raise Disagreement(f"record {i}: timestamp {ts} here, {record.timestamp} for kafka-python")
        if (record.key is not None) != has_key:
            raise Disagreement(f"record {i}: key presence differs")


def fix_crcs(data: bytes) -> bytes:
    """``data`` with the CRC32C of every batch whose length fits recomputed."""
    out = bytearray(data)
    pos = 0
    while pos + rb.HEADER_SIZE <= len(out):
        size = int.from_bytes(out[pos + 8 : pos + 12], "big", signed=True) + rb.LOG_OVERHEAD
        if size < rb.HEADER_SIZE or pos + size > len(out):
            break
        out[pos + 17 : pos + 21] = crc32c.crc32c(memoryview(out)[pos + 21 : pos + size]).to_bytes(4, "big")
        pos += size
    return bytes(out)


def bulk_agrees(data: bytes, header: rb.BatchHeader) -> None:
    """The bulk walk (numpy, used from BULK_MIN_RECORDS records) accepts only what the
    record-by-record walk accepts, with the same keys and timestamps: checked on every input,
    whatever its record count."""
    start, end = header.position + rb.HEADER_SIZE, header.position + header.size
    body = data
    if header.compression:
        try:
            body = bytes(rb.decompress_view(header.compression, memoryview(data)[start:end], LIMIT))
        except rb.InvalidBatch:
            return
        start, end = 0, len(body)
    bulk: list = []
    if rb._walk_bulk(body, start, end, header.record_count, bulk):
        one_by_one: list = []
        try:
            rb.walk_records(body, start, end, header.record_count, one_by_one)
        except rb.InvalidBatch as exc:
            raise Disagreement(f"the bulk walk accepted what walk_records refuses: {exc}") from exc
        if bulk != one_by_one:
            raise Disagreement("the bulk walk read other keys or timestamps")


LIMIT = rb.decompressed_limit(16 * 1024)


def test_one_input(data: bytes) -> None:
    data = fix_crcs(data)
    try:
        for header in rb.scan_batches(data):
            bulk_agrees(data, header)
    except rb.InvalidBatch:
        pass
    try:
        batches = validation.scan(data, CONFIG, name="fuzz-0")
        validation.validate(data, batches, CONFIG, acks=1, now_ms=NOW_MS, name="fuzz-0", node_id=1)
    except errors.KafkaError:
        return
    for header in batches:  # accepted: what a consumer reads must be what was checked
        metas: list = []
        rb.check_records(data, header, limit=rb.decompressed_limit(CONFIG.max_message_bytes), metas=metas)
        consumer_agrees(data, header, metas)


def main() -> None:
    from ._runner import main as run

    run("batches", test_one_input, [SEEDS])


if __name__ == "__main__":
    main()
    sys.exit(0)
