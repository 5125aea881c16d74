"""The decode guard (oncelog.protocol.guard): no frame makes kio allocate more than the frame
can hold; real clients' frames pass unchanged.

Each hostile frame below would, without the guard, make kio's native reader reserve the
declared count up front (34 GB for the first one) and abort the process; here each must give
DecodeError naming the field. Frames found by the fuzz harnesses (tests/fuzz) are added here.
"""

from __future__ import annotations

import io
import os
import struct

import pytest

from oncelog import apis
from oncelog.protocol import codec, guard
from oncelog.client.wire import request_module, write_request

CORPUS = os.path.join(os.path.dirname(__file__), "..", "fuzz", "corpus", "requests")


def corpus_frames() -> list[tuple[str, bytes]]:
    return [(n, open(os.path.join(CORPUS, n), "rb").read()) for n in sorted(os.listdir(CORPUS))]


def refused(frame: bytes) -> str:
    key, version, _ = codec.peek_header(frame)
    with pytest.raises(codec.DecodeError) as info:
        codec.decode_request(frame, key, version)
    return str(info.value)


def encode(request, client_id: str = "test") -> bytes:
    out = io.BytesIO()
    write_request(out, request, 1, client_id)
    return out.getvalue()


def header_v1(key: int, version: int) -> bytes:
    return struct.pack(">hhih", key, version, 1, -1)


def header_v2(key: int, version: int) -> bytes:
    return header_v1(key, version) + b"\x00"


# --------------------------------------------------------------------------- the frames

def test_metadata_v12_with_a_huge_compact_topic_count_is_refused():
    # The reproducer: 20 bytes on the wire, 34 GB in kio.
    frame = bytes.fromhex("000000100003000c00000001ffff00ffffffff0f")[4:]
    msg = refused(frame)
    assert "MetadataRequest v12" in msg
    assert "topics: array of 4294967294 elements (at least 18 bytes each) but 0 bytes left" in msg


def test_a_legacy_int32_count_of_2_31_minus_1_is_refused_before_kio():
    # kio asks for 16 GiB here: it aborts wherever memory is capped (ulimit -v, cgroups).
    msg = refused(header_v1(3, 1) + struct.pack(">i", 2**31 - 1))
    assert "topics: array of 2147483647 elements" in msg and "bytes left" in msg


@pytest.mark.parametrize("frame, field", [
    # DescribeGroups v0 and v5: groups is tuple[str, ...], a primitive array.
    (header_v1(15, 0) + struct.pack(">i", 2**31 - 1), "groups"),
    (header_v2(15, 5) + b"\xff\xff\xff\xff\x0f", "groups"),
    # OffsetFetch v2: topics[].partition_indexes is tuple[i32, ...] (4 bytes each).
    (header_v1(9, 2) + b"\x00\x01g" + struct.pack(">ih", 1, 1) + b"t" + struct.pack(">i", 5), "topics[].partition_indexes"),
    # CreateTopics v5: a nested entity array inside an entity array.
    (header_v2(19, 5) + b"\x02\x02t" + struct.pack(">ih", 1, 1) + b"\xfe\xff\xff\xff\x0f", "topics[].assignments"),
])
def test_primitive_and_nested_arrays_are_checked_too(frame, field):
    msg = refused(frame)
    assert f"{field}: array of " in msg and "bytes left" in msg


def test_a_count_the_bytes_could_hold_but_over_kafkas_cap_is_refused():
    # DescribeGroups v0 with 1,000,001 empty group ids: 2 bytes each, all present.
    n = guard.MAX_ARRAY_ELEMENTS + 1
    msg = refused(header_v1(15, 0) + struct.pack(">i", n) + b"\x00\x00" * n)
    assert f"groups: array of {n} elements exceeds the limit of {guard.MAX_ARRAY_ELEMENTS}" in msg


def test_the_request_as_a_whole_has_an_element_budget():
    # DescribeConfigs v1: two resources of 600,000 configuration keys each (every array under
    # Kafka's cap, 1.2 million elements in all).
    keys = struct.pack(">i", 600_000) + b"\x00\x00" * 600_000
    resource = b"\x02" + struct.pack(">h", 1) + b"t" + keys
    msg = refused(header_v1(32, 1) + struct.pack(">i", 2) + resource * 2 + b"\x00")
    assert "resources[].configuration_keys: array of 600000 elements takes the request over" in msg


def test_the_element_budget_leaves_room_for_real_requests():
    m = request_module(15, 0)
    frame = encode(m.DescribeGroupsRequest(groups=tuple(f"g{i}" for i in range(100_000))))
    _, body = codec.decode_request(frame, 15, 0)
    assert len(body.groups) == 100_000


@pytest.mark.parametrize("frame, expected", [
    # client_id (legacy int16 length) of 30000 bytes in a 12-byte frame
    (struct.pack(">hhih", 18, 0, 1, 30000) + b"ab", "client_id: string of 30000 bytes but 2 bytes left"),
    # a negative string length other than -1 (null)
    (struct.pack(">hhih", 18, 0, 1, -7), "client_id: negative string length -7"),
    # Produce v3: records (legacy int32 bytes) longer than the frame
    (header_v1(0, 3) + struct.pack(">hhi", -1, -1, 1000) + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"
     + struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", 10**9), "records of 1000000000 bytes"),
    # a legacy array count below -1
    (header_v1(3, 1) + struct.pack(">i", -5), "topics: negative array length -5"),
])
def test_strings_bytes_and_negative_lengths(frame, expected):
    assert expected in refused(frame)


def test_tagged_fields_are_bounded():
    m = request_module(3, 12)
    good = encode(m.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                    include_topic_authorized_operations=False))
    assert good[-1] == 0  # the body's tagged-field section: none
    # 2^28 tagged fields declared, 0 bytes left for them
    assert "tagged fields but 0 bytes left" in refused(good[:-1] + b"\x80\x80\x80\x80\x01")
    # a tagged field declaring 1000 bytes with 2 present
    assert "tagged field of 1000 bytes but 2 bytes left" in refused(good[:-1] + b"\x01\x05\xe8\x07ab")
    # a varint that goes on past 5 bytes
    assert "varint longer than 5 bytes" in refused(good[:-1] + b"\xff\xff\xff\xff\xff\x01")


def test_an_unknown_tagged_field_is_still_skipped():
    m = request_module(3, 12)
    good = encode(m.MetadataRequest(topics=(m.MetadataRequestTopic(topic_id=None, name="t"),),
                                    allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    frame = good[:-1] + b"\x01\x63\x02xy"  # tag 99, 2 bytes
    info, body = codec.decode_request(frame, 3, 12)
    assert body.topics[0].name == "t" and info.client_id == "test"


def test_a_known_tagged_field_must_fill_its_declared_size():
    # Fetch v12's top-level tag 0 is cluster_id (a compact string).
    m = request_module(1, 12)
    import datetime
    good = encode(m.FetchRequest(replica_id=-1, max_wait=datetime.timedelta(milliseconds=100), min_bytes=1,
                                 max_bytes=1000, isolation_level=0, session_id=0, session_epoch=-1, topics=(),
                                 forgotten_topics_data=(), rack_id=""))
    ok = good[:-1] + b"\x01\x00\x03\x03ab"  # tag 0, 3 bytes: compact string "ab"
    _, body = codec.decode_request(ok, 1, 12)
    assert body.cluster_id == "ab"
    assert "declares 5 bytes but its value takes 3" in refused(good[:-1] + b"\x01\x00\x05\x03ab\x00\x00")


def test_truncated_frames_are_refused_as_truncated():
    m = request_module(3, 12)
    good = encode(m.MetadataRequest(topics=(m.MetadataRequestTopic(topic_id=None, name="topic"),),
                                    allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    for cut in range(8, len(good)):
        assert "cannot decode MetadataRequest v12" in refused(good[:cut])


# --------------------------------------------------------------------------- real clients' frames

@pytest.mark.parametrize("name, frame", corpus_frames(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_captured_client_frame_passes_and_the_guard_walks_as_kio_reads(name, frame):
    key, version, _ = codec.peek_header(frame)
    cls = codec.request_class(key, version)
    end = guard.check_request(cls, frame)
    header, used = codec.reader(cls.__header_schema__)(frame, 0)
    _, size = codec.reader(cls)(frame, used)
    assert end == used + size
    codec.decode_request(frame, key, version)


def test_the_corpus_has_all_three_clients():
    names = [n for n, _ in corpus_frames()]
    for client in ("confluent", "kafka-python", "aiokafka"):
        assert sum(client in n for n in names) >= 20, client


def test_a_walk_is_generated_for_every_request_the_broker_serves():
    count = 0
    for key, module in apis.HANDLERS.items():
        for version in range(module.MIN_VERSION, module.MAX_VERSION + 1):
            check = guard._checker(codec.request_class(key, version))
            assert "def check(buf):" in check.source
            count += 1
    assert count > 150


# --------------------------------------------------------------------------- fuzz finds

# Frames found by tests/fuzz/fuzz_requests.py run with the guard switched off: each made kio
# ask for 28 to 272 GB and abort the process (found within 1,000 to 47,000 inputs per run).
# With the guard on, the harness has found nothing (see the fuzzing run's report).
FUZZ_FINDS = [
    "001400050016000000000101009ffafafa3afafad1fa00131e1717171717610000d701012a000029000100",
    "0001001101000000000000520100010107000101012a01ffffffffffffffffffffffffff7e00",
    "0001000d03030003000d000000000000004c03000000400000000000070000000000000d00010000000003010003ffffffffffffff19",
    "0003000a00000000000000f6ffffff100a00",
    "002300030100ffff000000fffffffe2e00",
    "001000050000000a000772646b61666b6100949e949e0d0000010100010100",
    "0001000f00000000000000000000020000ff00ffff0000ffffffff5bffffffffffffffff5bff000000000000ffffffffffff00000000"
    "0000000000fe00e603000000000000000000000000070272276433000000000000000016",
    "001800040000ffffffff00ffffffff160000000000000000000000000000",
    "0003000c00000000000000ffffffff6166ffffffff07",
]


@pytest.mark.parametrize("hexframe", FUZZ_FINDS)
def test_fuzz_finds_give_decode_error(hexframe):
    assert ": array of " in refused(bytes.fromhex(hexframe))
