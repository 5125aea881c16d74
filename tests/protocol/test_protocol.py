"""Bytes-level tests of the sans-IO protocol layer: framing, decoding, record batch scans."""

from __future__ import annotations

import struct

import pytest

from oncelog.apis import HANDLERS
from oncelog.broker import Broker, ProtocolViolation
from oncelog.config.settings import BrokerConfig
from oncelog.protocol import codec
from oncelog.protocol import records as rb
from oncelog.protocol.framing import BufferedFrameReader, FrameTooLarge, InvalidFrame


def api_versions_v3(correlation_id: int = 7, body_tags: bytes = b"\x00", header_tags: bytes = b"\x00") -> bytes:
    header = struct.pack(">hhih", 18, 3, correlation_id, 3) + b"abc" + header_tags
    return header + b"\x04rdk" + b"\x042.1" + body_tags


def feed(reader: BufferedFrameReader, wire: bytes, step: int) -> list[bytes]:
    """Deliver ``wire`` to the reader ``step`` bytes at a time, as a socket would."""
    out, pos = [], 0
    while pos < len(wire):
        buf = reader.get_buffer()
        n = min(len(buf), step, len(wire) - pos)
        buf[:n] = wire[pos : pos + n]
        pos += n
        out += [bytes(f) for f in reader.updated(n)]
    return out


def test_frames_split_across_reads_and_several_in_one_read():
    frames = [b"a" * 10, b"", b"b" * 300]
    wire = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    assert feed(BufferedFrameReader(1 << 20), wire, 7) == frames
    assert feed(BufferedFrameReader(1 << 20), wire, len(wire)) == frames


def test_oversized_or_negative_frame_refused_from_its_prefix_alone():
    with pytest.raises(FrameTooLarge):
        feed(BufferedFrameReader(1000), struct.pack(">i", 1001), 4)  # no body bytes needed to refuse it
    with pytest.raises(InvalidFrame):
        feed(BufferedFrameReader(1000), struct.pack(">i", -5), 4)


def test_decode_tolerates_trailing_bytes_and_unknown_tagged_fields():
    _, body = codec.decode_request(api_versions_v3() + b"\x00\x00\x00", 18, 3)
    assert body.client_software_name == "rdk"
    # an unknown tag (99) in the body and in the header is skipped, as KIP-482 requires
    header, body = codec.decode_request(api_versions_v3(body_tags=b"\x01\x63\x02ab", header_tags=b"\x01\x63\x01z"), 18, 3)
    assert (header.client_id, body.client_software_version) == ("abc", "2.1")


def test_garbage_body_is_a_decode_error_naming_the_api():
    frame = struct.pack(">hhih", 3, 12, 1, 3) + b"abc" + b"\x00" + b"\xff\xff\xff\xff\xff"
    with pytest.raises(codec.DecodeError, match="MetadataRequest v12"):
        codec.decode_request(frame, 3, 12)


def test_api_versions_advertises_exactly_the_handlers(tmp_path):
    broker = Broker(BrokerConfig(data_dir=str(tmp_path)))
    chunks = broker.handle_frame(api_versions_v3(correlation_id=42), "test")
    raw = b"".join(chunks)
    size, correlation_id = struct.unpack_from(">ii", raw)
    assert size == len(raw) - 4 and correlation_id == 42
    resp, _ = codec.reader(codec.response_class(18, 3))(raw, 8)  # header v0: no tag byte
    advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    # Produce is advertised from v0 as Kafka 4.4 does (KAFKA-18659) and served from v3
    assert advertised == {key: (getattr(m, "ADVERTISED_MIN_VERSION", m.MIN_VERSION), m.MAX_VERSION)
                          for key, m in HANDLERS.items()}
    assert advertised[0] == (0, 13) and HANDLERS[0].MIN_VERSION == 3


def _api_versions_frame(version: int) -> bytes:
    """An ApiVersions request of ``version`` (v3+: client software name and version, tag bytes)."""
    frame = struct.pack(">hhih", 18, version, 9, -1)
    if version >= 3:  # compact strings (length + 1) and an empty tag section, in the header and the body
        frame += b"\x00" + bytes([len("java") + 1]) + b"java" + bytes([len("3.4.0") + 1]) + b"3.4.0" + b"\x00"
    return frame


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_features_by_version(tmp_path, version):
    """KAFKA-17492: below ApiVersions v4 a supported feature with minimum 0 is left out (kafka-clients
    3.4 and 3.6 refuse it and drop the connection); finalized features are there at every flexible version."""
    broker = Broker(BrokerConfig(data_dir=str(tmp_path)))
    raw = b"".join(broker.handle_frame(_api_versions_frame(version), "test"))
    resp, _ = codec.reader(codec.response_class(18, version))(raw, 8)
    supported = {f.name: (f.min_version, f.max_version) for f in resp.supported_features}
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in resp.finalized_features}
    assert finalized == {"transaction.version": (2, 2), "group.version": (1, 1)}
    if version < 4:
        assert supported == {}
    else:
        assert supported == {"transaction.version": (0, 2), "group.version": (0, 1)}


def test_unknown_api_versions_version_gets_v0_unsupported_version(tmp_path):
    broker = Broker(BrokerConfig(data_dir=str(tmp_path)))
    frame = struct.pack(">hhih", 18, 99, 5, -1)
    raw = b"".join(broker.handle_frame(frame, "test"))
    resp, _ = codec.reader(codec.response_class(18, 0))(raw, 8)
    assert resp.error_code == 35  # UNSUPPORTED_VERSION
    assert any(k.api_key == 0 for k in resp.api_keys)


def test_unsupported_version_of_other_api_is_a_protocol_violation(tmp_path):
    broker = Broker(BrokerConfig(data_dir=str(tmp_path)))
    with pytest.raises(ProtocolViolation, match="produce v1"):
        broker.handle_frame(struct.pack(">hhih", 0, 1, 5, -1), "test")
    with pytest.raises(ProtocolViolation, match="unknown API key"):
        broker.handle_frame(struct.pack(">hhih", 999, 0, 5, -1), "test")


def test_scan_accepts_valid_batches_and_patching_offsets_keeps_crc_valid():
    data = bytearray(rb.build_batch([(b"k", b"v")] * 3) + rb.build_batch([(None, b"x")]))
    batches = rb.scan_batches(bytes(data))
    assert [b.record_count for b in batches] == [3, 1]
    rb.patch_base_offset(data, batches[1].position, 12345)
    again = rb.scan_batches(bytes(data))
    assert again[1].base_offset == 12345


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda b: b.__setitem__(slice(70, 71), bytes([b[70] ^ 0xFF])), "CRC mismatch"),
        (lambda b: b.__setitem__(16, 1), "magic"),
        (lambda b: b.__delitem__(slice(-3, None)), "overruns"),
        (lambda b: b.__delitem__(slice(40, None)), "truncated batch header"),
    ],
)
def test_scan_rejects_bad_batches(mutate, message):
    data = bytearray(rb.build_batch([(b"k", b"v" * 20)]))
    mutate(data)
    with pytest.raises(rb.InvalidBatch, match=message):
        rb.scan_batches(bytes(data))


def test_scan_enforces_max_message_bytes():
    data = rb.build_batch([(b"k", b"v" * 2000)])
    with pytest.raises(rb.BatchTooLarge):
        rb.scan_batches(data, max_batch_bytes=1000)
    assert rb.scan_batches(data, max_batch_bytes=len(data))


def test_record_count_must_match_offset_delta():
    data = bytearray(rb.build_batch([(b"k", b"v")] * 2))
    struct.pack_into(">i", data, 57, 5)  # recordCount: covered by the CRC, so fix the CRC too
    import crc32c

    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    with pytest.raises(rb.InvalidBatch, match="record count"):
        rb.scan_batches(bytes(data))


def test_buffered_reader_small_and_large_frames_in_arbitrary_reads():
    import random

    rng = random.Random(5)
    frames = [rng.randbytes(rng.choice([0, 10, 300, 5000, 70_000, 300_000])) for _ in range(60)]
    wire = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    reader = BufferedFrameReader(1 << 20, chunk=64 * 1024)
    out, pos = [], 0
    while pos < len(wire):
        buf = reader.get_buffer()
        n = min(len(buf), rng.randrange(1, 100_000), len(wire) - pos)
        buf[:n] = wire[pos : pos + n]
        pos += n
        out += [bytes(f) for f in reader.updated(n)]
    assert out == frames
