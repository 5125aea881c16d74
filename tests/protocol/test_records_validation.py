"""Record validation as Kafka's LogValidator / DefaultRecord.readFrom do it, and bounded
decompression.

Two levels: :func:`oncelog.protocol.records.check_records` with Kafka's messages, and a Produce
through the in-process broker (tests/apis/harness.py) answering the right code with nothing of the
partition stored, the partition serving afterwards. The same reproducers against a broker process
are in tests/e2e/test_record_validation.py.
"""

from __future__ import annotations

import gzip
import struct

import cramjam
import lz4.frame
import pytest
import zstandard

from oncelog.protocol import records as rb
from tests import bad_batches as bad
from tests.apis.harness import E, run


def _check(batch: bytes, **kwargs):
    [h] = rb.scan_batches(batch)
    metas = []
    rb.check_records(batch, h, metas=metas, **kwargs)
    return metas


def _refused(batch: bytes, **kwargs) -> rb.InvalidBatch:
    with pytest.raises(rb.InvalidBatch) as info:
        [h] = rb.scan_batches(batch)
        rb.check_records(batch, h, **kwargs)
    return info.value


# ------------------------------------------------------------------ what each check says


def test_valid_batches_pass_with_keys_timestamps_and_headers():
    body = (rb.encode_record(0, 0, b"k", b"v", [("h1", b"x"), ("h2", None)])
            + rb.encode_record(1, 5, None, None) + rb.encode_record(2, -3, b"", b""))
    assert _check(bad.raw_batch(body, count=3)) == [(0, True), (5, False), (-3, True)]


@pytest.mark.parametrize("n", [1, 63, 64, 65, 300, 8191, 8192, 8193])
def test_offset_delta_varints_of_every_width_pass(n):
    # 64 and 8192 are where zig-zag(offset delta) needs a second and a third byte.
    assert len(_check(bad.valid(n))) == n


def test_lying_record_length_is_kafkas_invalid_record_size():
    assert _refused(bad.lying_length()).reason.startswith("Invalid record size: expected")
    assert "but instead read" in _refused(bad.short_length()).reason


def test_random_records_are_refused():
    for seed in range(50):
        assert not _refused(bad.random_records(seed)).corrupt  # INVALID_RECORD, as Kafka


def test_offset_deltas_must_be_0_to_n_minus_1_with_the_record_named():
    exc = _refused(bad.offset_deltas())
    assert "does not have incremental offsets" in exc.reason
    assert exc.record_errors and exc.record_errors[0][0] == 1  # the second record (delta -1)
    assert _refused(bad.offset_deltas((1, 2))).record_errors[0][0] == 0


def test_record_count_must_match_the_records_present():
    assert _refused(bad.count_lies(1000)).reason == "Incorrect declared batch size, premature EOF reached"
    assert _refused(bad.count_lies(bad.INT32_MAX)).reason == "Incorrect declared batch size, premature EOF reached"
    assert _refused(bad.trailing_bytes()).reason == "Incorrect declared batch size, records still remaining in file"


def test_a_lying_count_allocates_nothing_by_it():
    # Found by tests/fuzz/fuzz_batches.py (out of memory): the bulk walk sized its arrays by the
    # declared count. A 2^31 - 1 count over a few records is refused at once.
    data = bad.raw_batch(b"".join(bad.record(i) for i in range(30)), count=bad.INT32_MAX)
    assert _refused(data).reason == "Incorrect declared batch size, records still remaining in file" or \
        "premature EOF" in _refused(data).reason


def test_headers_and_varints_as_kafka_reads_them():
    assert _refused(bad.negative_header_count()).reason == "Found invalid number of record headers -1"
    assert _refused(bad.null_header_key()).reason == "Invalid negative header key size -1"
    assert _refused(bad.varint_too_long()).reason == "Found invalid record structure"
    too_many = b"\x00" + rb._varint(0) * 2 + rb._varint(-1) * 2 + rb._varint(1000)
    exc = _refused(bad.raw_batch(rb._varint(len(too_many)) + too_many, count=1))
    assert exc.reason.startswith("Found invalid number of record headers. 1000 is larger")


def test_what_breaks_python_consumers_is_refused_stricter_than_kafka():
    # Found by tests/fuzz/fuzz_batches.py: kafka-python (and aiokafka) cannot read these batches,
    # Kafka's broker accepts them.
    body = b"\x00" + rb._varint(0) * 2 + rb._varint(-1) * 2 + rb._varint(1) + rb._varint(1) + b"\x8f" + rb._varint(-1)
    assert _refused(bad.raw_batch(rb._varint(len(body)) + body, count=1)).reason == "Invalid header key: not UTF-8"
    rec = bytearray(bad.record(0))
    rec[1] = 0x80  # record attributes with the high bit: kafka-python reads the byte as a varint
    assert _refused(bad.raw_batch(bytes(rec), count=1)).reason == "Invalid record attributes 0x80"
    rec[1] = 0x40  # unused bits Kafka ignores: accepted
    assert len(_check(bad.raw_batch(bytes(rec), count=1))) == 1


def test_unknown_codecs_are_refused_at_the_header():
    for codec in (5, 6, 7):
        with pytest.raises(rb.InvalidBatch, match=f"Unknown compression type id: {codec}"):
            rb.scan_batches(bad.unknown_codec(codec))


def test_compressed_records_are_walked_and_a_bad_payload_refused():
    body = b"".join(bad.record(i) for i in range(4))
    assert len(_check(bad.gzip_of(body, 4))) == 4
    assert "decompress" in _refused(bad.gzip_random()).reason
    assert _refused(bad.gzip_of(body, 5)).reason == "Incorrect declared batch size, premature EOF reached"
    assert _refused(bad.gzip_of(body + b"\x00", 4)).reason.startswith("Incorrect declared batch size, records")


@pytest.mark.parametrize("codec", [rb.COMPRESSION_GZIP, rb.COMPRESSION_SNAPPY, rb.COMPRESSION_LZ4,
                                   rb.COMPRESSION_ZSTD])
def test_every_codec_round_trips_within_the_limit_and_is_refused_beyond(codec):
    body = b"".join(bad.record(i, bytes(1000)) for i in range(100))
    batch = bad.raw_batch(rb.compress_records(codec, body), count=100, attributes=codec)
    assert len(_check(batch, limit=len(body))) == 100  # exactly at the limit: accepted
    with pytest.raises(rb.RecordsTooLarge):
        _check(batch, limit=len(body) - 1)


def test_other_writers_framings_decompress():
    # What kafka-python and librdkafka may send: a linked-block LZ4 frame, a zstd frame without
    # content size, a raw (unframed) snappy block, a two-member gzip stream.
    body = b"".join(bad.record(i, b"x" * 50) for i in range(40))
    half = len(bad.record(0, b"x" * 50)) * 20
    stream = zstandard.ZstdCompressor().compressobj()
    for codec, data in [(rb.COMPRESSION_LZ4, lz4.frame.compress(body, block_linked=True)),
                        (rb.COMPRESSION_ZSTD, stream.compress(body) + stream.flush()),
                        (rb.COMPRESSION_SNAPPY, bytes(cramjam.snappy.compress_raw(body))),
                        (rb.COMPRESSION_GZIP, gzip.compress(body[:half]) + gzip.compress(body[half:]))]:
        assert len(_check(bad.raw_batch(data, count=40, attributes=codec))) == 40


def test_a_bomb_is_refused_without_being_materialised():
    bomb = bad.zstd_bomb(gib=0.125)  # 128 MiB of zeros: twice the default limit
    assert len(bomb) < 8 * 1024
    with pytest.raises(rb.RecordsTooLarge):
        _check(bomb)
    # Every codec, with a payload that keeps going: bounded as well.
    zeros = bytes(80 << 20)
    for codec, data in [(rb.COMPRESSION_GZIP, gzip.compress(zeros, 1)),
                        (rb.COMPRESSION_LZ4, lz4.frame.compress(zeros)),
                        (rb.COMPRESSION_SNAPPY, rb.compress_records(rb.COMPRESSION_SNAPPY, zeros))]:
        with pytest.raises(rb.RecordsTooLarge):
            rb.decompress_view(codec, data, rb.DEFAULT_DECOMPRESSED_LIMIT)


def test_snappy_length_is_checked_before_decompressing():
    block = bytes(cramjam.snappy.compress_raw(b"x" * 1000))
    with pytest.raises(rb.RecordsTooLarge):
        rb.decompress_view(rb.COMPRESSION_SNAPPY, block, 999)
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block) + 5) + block
    with pytest.raises(rb.InvalidBatch, match="overruns"):
        rb.decompress_view(rb.COMPRESSION_SNAPPY, xerial, 10_000)


def test_the_limit_is_64_times_max_message_bytes_up_to_256_mib():
    assert rb.decompressed_limit() == 64 * 1048588
    assert rb.decompressed_limit(100) == 6400
    assert rb.decompressed_limit(10 << 20) == 256 << 20


# ------------------------------------------------------------------ through Produce, in-process


def test_every_reproducer_is_refused_by_produce_and_nothing_is_stored(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        for name, (build, code) in bad.REPRODUCERS.items():
            p = await api.produce("t", build())
            assert p.error_code == getattr(E, code), name
            assert api.log_end("t") == 0, name
        p = await api.produce("t", bad.offset_deltas())
        assert [(e.batch_index, "incremental" in e.batch_index_error_message) for e in p.record_errors] == [(1, True)]
        p = await api.produce("t", bad.valid(3))
        assert (p.error_code, p.base_offset, api.log_end("t")) == (E.none, 0, 3)

    run(tmp_path, scenario)


def test_a_bomb_is_message_too_large_and_a_smaller_limit_follows_max_message_bytes(tmp_path):
    body = b"".join(bad.record(i, bytes(1000)) for i in range(100))  # ~100 KiB of records
    gz = bad.gzip_of(body, 100)

    async def scenario(api):
        await api.create_topic("t")
        assert (await api.produce("t", bad.zstd_bomb(gib=0.125))).error_code == E.message_too_large
        await api.create_topic("small", **{"max.message.bytes": "1000"})  # limit 64,000 bytes
        assert (await api.produce("small", gz)).error_code == E.message_too_large
        assert (await api.produce("t", gz)).error_code == E.none
        return api.log_end("t"), api.log_end("small")

    assert run(tmp_path, scenario) == (100, 0)


def test_a_partition_with_a_stored_bomb_still_answers_list_offsets_by_timestamp(tmp_path):
    # A bomb written before this validation existed (planted through the log, below Produce).
    async def scenario(api):
        await api.create_topic("t")
        plog = api.partition("t").log
        bomb = bytearray(bad.zstd_bomb(gib=0.125))
        struct.pack_into(">q", bomb, 35, 5000)  # max timestamp (the CRC does not matter below)
        plog.append(bomb, rb.scan_batches(bytes(bomb), verify_crc=False), 1000)
        assert plog.offset_for_timestamp(4000) == (0, 5000)  # read as one record
        assert plog.offset_of_max_timestamp() == (0, 5000)

    run(tmp_path, scenario)


def test_zstd_needs_produce_v7_as_in_kafka(tmp_path):
    body = b"".join(bad.record(i) for i in range(3))
    zstd = bad.raw_batch(rb.compress_records(rb.COMPRESSION_ZSTD, body), count=3, attributes=rb.COMPRESSION_ZSTD)

    async def scenario(api):
        await api.create_topic("t")
        assert (await api.produce("t", zstd, version=6)).error_code == E.unsupported_compression_type
        assert (await api.produce("t", zstd, version=7)).error_code == E.none
        return api.log_end("t")

    assert run(tmp_path, scenario) == 3
