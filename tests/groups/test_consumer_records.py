"""The ``__consumer_offsets`` records of consumer (KIP-848) groups (:mod:`oncelog.groups.consumer_records`).

The golden records below were written by Apache Kafka 4.4 (read raw from its ``__consumer_offsets``
after confluent-kafka consumers joined, committed and left: with ``group.protocol=consumer`` one
subscribed by name and one static member subscribed by a regular expression, and a classic-protocol
member joining a consumer group, which made the first revoke partitions), so the codec is
pinned to Kafka's bytes without a JVM; tests/kafka/test_consumer_records_kafka.py checks the same
against a live Kafka. Then: round trips of every field Kafka's generated classes have, the
tombstones and the replay dispatch of the store, and the refusals (unknown types and versions,
truncation, hostile counts) that must all be ValueError. Last, a live oncelog broker's records of
a consumer group, decoded and re-encoded byte for byte and checked against what the clients know
(the same checks as against Apache Kafka in tests/kafka).
"""

from __future__ import annotations

from tests.broker_parts import open_parts

import asyncio
import time
from dataclasses import dataclass
from uuid import UUID

import pytest

from oncelog.groups import consumer_records as cr
from oncelog.groups.consumer_records import (
    CONSUMER_KEYS,
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    PartitionMetadataTopic,
    decode_consumer_value,
    encode_consumer_value,
)
from oncelog.groups.records import GroupKey, OffsetKey, decode_key, encode_key, record_type

T1 = UUID("870f4258-2bae-4330-ac33-cbeac184d331")
T2 = UUID("f79c57a3-4067-48ca-847a-f11057566e27")
M1 = "42jWTGubRqS5WDeyqjXH2Q"
M2 = "spOSl1MTTLiYYVZzDxJOVw"
T3 = UUID("e84daa24-5a72-46a2-a1b4-881e1f9b6842")
M3 = "C4my8ynBT8GmzVLwxOXh6A"
M4 = "V9DkyqLPRP6jze5Syn69ZA"
# the classic member's ConsumerProtocolSubscription v3: topics [cl-3685d5], no user data, no owned
# partitions, generation -1, no rack
SUBSCRIPTION = bytes.fromhex("0003000000010009636c2d3336383564350000000000000000ffffffff0000")

# (key, key bytes, value, value bytes), as Apache Kafka 4.4 wrote them, in the order it wrote them.
KAFKA_RECORDS = [
    # a member subscribed to one topic by name joins: its subscription, the group epoch (with the
    # metadata hash), the target assignment, its epoch, the member's current assignment (with
    # Kafka 4.4's per-partition assignment epochs)
    (ConsumerGroupMemberMetadataKey("g-3a2dbf", M1),
     "00050008672d336132646266001634326a57544775625271533557446579716a58483251",
     ConsumerGroupMemberMetadataValue(None, None, "r-client", "/127.0.0.1", ("t-d1affd",), "", 300000, None, None),
     "0000000009722d636c69656e740b2f3132372e302e302e310209742d64316166666401000493e00001000100"),
    (ConsumerGroupMetadataKey("g-3a2dbf"), "00030008672d336132646266",
     ConsumerGroupMetadataValue(2, -2942332558383788683), "000000000002010008d72abc209677cd75"),
    (ConsumerGroupTargetAssignmentMemberKey("g-3a2dbf", M1),
     "00070008672d336132646266001634326a57544775625271533557446579716a58483251",
     ConsumerGroupTargetAssignmentMemberValue({T1: frozenset(range(6))}),
     "000002870f42582bae4330ac33cbeac184d331070000000000000001000000020000000300000004000000050000"),
    (ConsumerGroupTargetAssignmentMetadataKey("g-3a2dbf"), "00060008672d336132646266",
     ConsumerGroupTargetAssignmentMetadataValue(2, 1795697858045), "000000000002010008000001a217eed5fd"),
    (ConsumerGroupCurrentMemberAssignmentKey("g-3a2dbf", M1),
     "00080008672d336132646266001634326a57544775625271533557446579716a58483251",
     ConsumerGroupCurrentMemberAssignmentValue(2, 0, 0, {T1: frozenset(range(6))}, {},
                                               {T1: {p: 2 for p in range(6)}}, {}),
     "000000000002000000000002870f42582bae4330ac33cbeac184d3310700000000000000010000000200000003000000040000"
     "0005010019070000000200000002000000020000000200000002000000020100"),
    # ... it leaves: tombstones (see test_kafka_tombstones_are_keys_alone), then the group's next
    # epoch without a metadata hash and a target assignment without a timestamp
    (ConsumerGroupMetadataKey("g-3a2dbf"), "00030008672d336132646266",
     ConsumerGroupMetadataValue(3, 0), "00000000000300"),
    (ConsumerGroupTargetAssignmentMetadataKey("g-3a2dbf"), "00060008672d336132646266",
     ConsumerGroupTargetAssignmentMetadataValue(3, 0), "00000000000300"),
    # a static member subscribed by a regular expression (librdkafka sends it in parentheses)
    (ConsumerGroupMemberMetadataKey("g-930526", M2),
     "00050008672d393330353236001673704f536c314d54544c695959565a7a44784a4f5677",
     ConsumerGroupMemberMetadataValue("inst-1", None, "r-client", "/127.0.0.1", (), "(^rx-930526.*)", 300000,
                                      None, None),
     "000007696e73742d310009722d636c69656e740b2f3132372e302e302e31010f285e72782d3933303532362e2a29000493e0"
     "0001000100"),
    (ConsumerGroupCurrentMemberAssignmentKey("g-930526", M2),
     "00080008672d393330353236001673704f536c314d54544c695959565a7a44784a4f5677",
     ConsumerGroupCurrentMemberAssignmentValue(1, 0, 0, {}, {}), "0000000000010000000000010100"),
    (ConsumerGroupRegularExpressionKey("g-930526", "(^rx-930526.*)"),
     "00100008672d393330353236000e285e72782d3933303532362e2a29",
     ConsumerGroupRegularExpressionValue(("rx-930526",), 384, 1795697860623),
     "0000020a72782d3933303532360000000000000180000001a217eee00f00"),
    (ConsumerGroupTargetAssignmentMemberKey("g-930526", M2),
     "00070008672d393330353236001673704f536c314d54544c695959565a7a44784a4f5677",
     ConsumerGroupTargetAssignmentMemberValue({T2: frozenset({0, 1, 2})}),
     "000002f79c57a3406748ca847af11057566e27040000000000000001000000020000"),
    (ConsumerGroupCurrentMemberAssignmentKey("g-930526", M2),
     "00080008672d393330353236001673704f536c314d54544c695959565a7a44784a4f5677",
     ConsumerGroupCurrentMemberAssignmentValue(2, 1, 0, {T2: frozenset({0, 1, 2})}, {}, {T2: {0: 2, 1: 2, 2: 2}}),
     "000000000002000000010002f79c57a3406748ca847af11057566e270400000000000000010000000201000d04000000020000"
     "0002000000020100"),
    # the static member leaves temporarily (epoch -2): its assignment stays, at assignment epoch 0
    (ConsumerGroupCurrentMemberAssignmentKey("g-930526", M2),
     "00080008672d393330353236001673704f536c314d54544c695959565a7a44784a4f5677",
     ConsumerGroupCurrentMemberAssignmentValue(-2, 1, 0, {T2: frozenset({0, 1, 2})}, {}, {T2: {0: 0, 1: 0, 2: 0}}),
     "0000fffffffe000000010002f79c57a3406748ca847af11057566e270400000000000000010000000201000d04000000000000"
     "0000000000000100"),
    # a classic-protocol member (librdkafka, group.protocol=classic) joins a consumer group of one
    # member: its JoinGroup protocols are kept, and the first member must revoke two partitions
    (ConsumerGroupMemberMetadataKey("g-3685d5", M4),
     "00050008672d33363835643500165639446b79714c505250366a7a653553796e36395a41",
     ConsumerGroupMemberMetadataValue(None, None, "r-c", "/127.0.0.1", ("cl-3685d5",), "", 300000, None,
                                      ClassicMemberMetadata(10000, (("range", SUBSCRIPTION),
                                                                    ("roundrobin", SUBSCRIPTION)))),
     "0000000004722d630b2f3132372e302e302e31020a636c2d33363835643501000493e00001005a0100002710030672616e6765"
     "200003000000010009636c2d3336383564350000000000000000ffffffff0000000b726f756e64726f62696e20000300000001"
     "0009636c2d3336383564350000000000000000ffffffff00000000"),
    (ConsumerGroupCurrentMemberAssignmentKey("g-3685d5", M3),
     "00080008672d333638356435001643346d7938796e425438476d7a564c77784f58683641",
     ConsumerGroupCurrentMemberAssignmentValue(3, 3, 1, {T3: frozenset({0, 1})}, {T3: frozenset({2, 3})},
                                               {T3: {0: 3, 1: 3}}, {T3: {2: 3, 3: 3}}),
     "000000000003000000030102e84daa245a7246a2a1b4881e1f9b684203000000000000000101000903000000030000000302e8"
     "4daa245a7246a2a1b4881e1f9b684203000000020000000301000903000000030000000300"),
    (ConsumerGroupCurrentMemberAssignmentKey("g-3685d5", M3),  # revoked: the kept partitions keep epoch 3
     "00080008672d333638356435001643346d7938796e425438476d7a564c77784f58683641",
     ConsumerGroupCurrentMemberAssignmentValue(4, 3, 0, {T3: frozenset({0, 1})}, {}, {T3: {0: 3, 1: 3}}),
     "000000000004000000030002e84daa245a7246a2a1b4881e1f9b68420300000000000000010100090300000003000000030100"),
]


@pytest.mark.parametrize("key, key_hex, value, value_hex", KAFKA_RECORDS,
                         ids=[f"{type(r[0]).__name__}-{i}" for i, r in enumerate(KAFKA_RECORDS)])
def test_kafka_written_records_decode_and_encode_byte_for_byte(key, key_hex, value, value_hex):
    assert decode_key(bytes.fromhex(key_hex)) == key
    assert encode_key(key).hex() == key_hex
    assert decode_consumer_value(key, bytes.fromhex(value_hex)) == value
    assert encode_consumer_value(value).hex() == value_hex


def test_kafka_tombstones_are_keys_alone():
    """Kafka's tombstones of a leaving member: the same keys, no value (the store passes None)."""
    for key_hex in ("00080008672d336132646266001634326a57544775625271533557446579716a58483251",
                    "00070008672d336132646266001634326a57544775625271533557446579716a58483251",
                    "00050008672d336132646266001634326a57544775625271533557446579716a58483251"):
        key = decode_key(bytes.fromhex(key_hex))
        assert isinstance(key, CONSUMER_KEYS) and key.member_id == M1


def test_offset_and_classic_group_keys_are_unchanged():
    offset_key = bytes.fromhex("0001000867726f75702dc3a900066f726465727300000007")
    assert decode_key(offset_key) == OffsetKey("group-é", "orders", 7)
    assert decode_key(bytes.fromhex("0002000867726f75702dc3a9")) == GroupKey("group-é")
    assert not isinstance(OffsetKey("g", "t", 0), CONSUMER_KEYS)


# -- round trips --------------------------------------------------------------------------------

ROUND_TRIPS = [
    (ConsumerGroupMetadataKey("grüppe"), ConsumerGroupMetadataValue(0)),
    (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(2**31 - 1, -(2**63))),
    (ConsumerGroupMemberMetadataKey("g", "m"),
     ConsumerGroupMemberMetadataValue("inst", "rack-é", "", "/::1", ("a", "b", "é" * 40), None, -1, "uniform")),
    (ConsumerGroupMemberMetadataKey("g", "m"),
     ConsumerGroupMemberMetadataValue(None, None, "c", "h", (), "^x.*", 45000, "range",
                                      ClassicMemberMetadata(10000, (("range", b"\x00\x01meta"), ("", b""))))),
    (ConsumerGroupMemberMetadataKey("g", "m"),  # Kafka's default struct: the tag is not written
     ConsumerGroupMemberMetadataValue(None, None, "c", "h", (), None, 1, None, ClassicMemberMetadata(0, ()))),
    (ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(-1, 2**62)),
    (ConsumerGroupTargetAssignmentMemberKey("g", "m"),
     ConsumerGroupTargetAssignmentMemberValue({T1: frozenset({5, 0, 2**31 - 1}), T2: frozenset(),
                                               UUID(int=0): frozenset({1})})),
    (ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
     ConsumerGroupCurrentMemberAssignmentValue(7, 6, 1, {T1: frozenset({0, 3})},
                                               {T2: frozenset({1, 2}), T1: frozenset({9})},
                                               {T1: {0: 7, 3: 5}}, {T2: {1: 6, 2: 4}})),
    (ConsumerGroupCurrentMemberAssignmentKey("g", "m"),  # epochs on no topic at all, or on some
     ConsumerGroupCurrentMemberAssignmentValue(-1, -1, 3, {T1: frozenset({1}), T2: frozenset({2})}, {},
                                               {T2: {2: 9}}, {})),
    (ConsumerGroupRegularExpressionKey("g", ".*"), ConsumerGroupRegularExpressionValue((), -1, 0)),
    (ConsumerGroupRegularExpressionKey("g", "t[0-9]+"), ConsumerGroupRegularExpressionValue(("t1", "t22"), 2**40, 17)),
]


@pytest.mark.parametrize("key, value", ROUND_TRIPS)
def test_round_trip(key, value):
    key_bytes = encode_key(key)
    assert decode_key(key_bytes) == key
    data = encode_consumer_value(value)
    assert decode_consumer_value(key, data) == value
    assert encode_consumer_value(decode_consumer_value(key, data)) == data


def test_null_classic_member_metadata_is_written_as_kafka_writes_it():
    """A consumer-protocol member (None) carries tag 0 holding a null marker; an absent tag is
    Kafka's default, an empty struct, not None."""
    value = ConsumerGroupMemberMetadataValue(None, None, "c", "h", (), None, 1, None)
    data = encode_consumer_value(value)
    assert data.endswith(bytes.fromhex("01000100"))  # one tagged field: tag 0, size 1, null
    absent = data[:-4] + b"\x00"
    decoded = decode_consumer_value(ConsumerGroupMemberMetadataKey("g", "m"), absent)
    assert decoded.classic_member_metadata == ClassicMemberMetadata(0, ())


def test_partitions_are_written_ascending_and_topics_in_their_order():
    value = ConsumerGroupTargetAssignmentMemberValue({T2: frozenset({17, 3, 8}), T1: frozenset({1})})
    data = encode_consumer_value(value)
    assert data[3:19] == T2.bytes and data[20:32] == bytes.fromhex("00000003" "00000008" "00000011")
    decoded = decode_consumer_value(ConsumerGroupTargetAssignmentMemberKey("g", "m"), data)
    assert list(decoded.topic_partitions) == [T2, T1]


def test_decoded_partitions_keep_the_order_kafka_wrote():
    """Kafka 4.4's uniform assignor gave a member [5, 2] (a live run): the decoded set equals
    {2, 5} and re-encodes as [5, 2]."""
    key = ConsumerGroupTargetAssignmentMemberKey("g", "m")
    data = bytes.fromhex("000002238f0e4d75a4429c94ac9915bdc0d33a0300000005000000020000")
    value = decode_consumer_value(key, data)
    (parts,) = value.topic_partitions.values()
    assert parts == frozenset({2, 5}) and parts.written_order == (5, 2)
    assert encode_consumer_value(value) == data
    assert isinstance(parts | {7}, frozenset) and not isinstance(parts | {7}, cr.PartitionSet)
    current = ConsumerGroupCurrentMemberAssignmentValue(3, 2, 0, {T1: cr.PartitionSet([5, 2])}, {}, {T1: {2: 1, 5: 3}})
    written = encode_consumer_value(current)
    assert bytes.fromhex("03" "00000005" "00000002" "01" "00" "09" "03" "00000003" "00000001") in written


def test_assignment_epochs_must_cover_their_topic_partitions():
    bad = ConsumerGroupCurrentMemberAssignmentValue(1, 0, 0, {T1: frozenset({0, 1})}, {}, {T1: {0: 1}})
    with pytest.raises(ValueError):
        encode_consumer_value(bad)


@pytest.mark.parametrize("tag_bytes", [
    "03" "0000000a" "0000000b",  # as long as the partitions: used
    "01",  # empty: Kafka's default, the member epoch applies
    "00",  # null
    "02" "0000000a",  # one epoch for two partitions: Kafka logs an error and uses the member epoch
])
def test_assignment_epochs_are_read_as_kafka_reads_them(tag_bytes):
    body = bytes.fromhex("0000" "00000005" "00000004" "00" "02" + T1.hex + "03" "00000000" "00000001")
    tagged = bytes.fromhex(tag_bytes)
    data = body + b"\x01\x00" + bytes([len(tagged)]) + tagged + bytes.fromhex("01" "00")
    value = decode_consumer_value(ConsumerGroupCurrentMemberAssignmentKey("g", "m"), data)
    assert value.assigned_partitions == {T1: frozenset({0, 1})}
    assert value.assigned_epochs == ({T1: {0: 10, 1: 11}} if tag_bytes.startswith("03") else {})


def test_a_topic_listed_twice_takes_its_later_entry_epochs_included():
    """Found by the fuzz harness: the earlier entry's epochs outlived its partitions, and the
    decoded value could not be encoded."""
    def topic(partitions: str, epochs: str | None) -> str:
        tagged = "" if epochs is None else "00" + f"{len(bytes.fromhex(epochs)):02x}" + epochs
        return T1.hex + partitions + ("01" if epochs is not None else "00") + tagged

    data = bytes.fromhex("0000" "00000005" "00000004" "00"
                         "03" + topic("03" "00000000" "00000001", "03" "00000001" "00000002")
                         + topic("02" "00000007", None) + "01" "00")
    key = ConsumerGroupCurrentMemberAssignmentKey("g", "m")
    value = decode_consumer_value(key, data)
    assert value.assigned_partitions == {T1: frozenset({7})} and value.assigned_epochs == {}
    assert decode_consumer_value(key, encode_consumer_value(value)) == value


def test_unknown_tagged_fields_and_trailing_bytes_are_skipped_as_kafka_does():
    data = bytes.fromhex("0000" "00000009" "02" "05" "03" "aabbcc" "00" "08" "0000000000000007") + b"trailing"
    assert decode_consumer_value(ConsumerGroupMetadataKey("g"), data) == ConsumerGroupMetadataValue(9, 7)


def test_deprecated_partition_metadata_is_decoded_not_written():
    key = decode_key(bytes.fromhex("0004" "0001" "67"))
    assert key == ConsumerGroupPartitionMetadataKey("g") and not isinstance(key, CONSUMER_KEYS)
    data = bytes.fromhex("0000" "02" + T1.hex + "02" "74" "00000003"
                         "02" "00000000" "02" "02" "72" "00" "00" "00" "00")
    expected = ConsumerGroupPartitionMetadataValue((PartitionMetadataTopic(T1, "t", 3),))
    assert decode_consumer_value(key, data) == expected
    with pytest.raises(TypeError):
        encode_consumer_value(ConsumerGroupPartitionMetadataValue(()))


# -- refusals: ValueError, and nothing else ----------------------------------------------------

@pytest.mark.parametrize("record_type", [-1, 9, 10, 14, 15, 18, 99, 32767])
def test_unknown_record_types_are_refused(record_type):
    """Share groups' types (9-15) and 18 (unused in Kafka 4.4) among them (streams groups' 17 and
    19-23 are tests/groups/test_streams_groups.py's)."""
    with pytest.raises(ValueError, match="unknown __consumer_offsets record type"):
        decode_key(record_type.to_bytes(2, "big", signed=True) + bytes.fromhex("000167"))


@pytest.mark.parametrize("key, _kh, _v, value_hex", KAFKA_RECORDS[:5] + KAFKA_RECORDS[9:10])
def test_unknown_value_versions_are_refused(key, _kh, _v, value_hex):
    for version in (1, -1, 0x7FFF):
        data = version.to_bytes(2, "big", signed=True) + bytes.fromhex(value_hex)[2:]
        with pytest.raises(ValueError, match="version"):
            decode_consumer_value(key, data)


@pytest.mark.parametrize("key, key_hex, _v, value_hex", KAFKA_RECORDS,
                         ids=[f"{type(r[0]).__name__}-{i}" for i, r in enumerate(KAFKA_RECORDS)])
def test_every_truncation_is_refused(key, key_hex, _v, value_hex):
    key_bytes, value_bytes = bytes.fromhex(key_hex), bytes.fromhex(value_hex)
    for n in range(len(key_bytes)):
        with pytest.raises(ValueError):
            decode_key(key_bytes[:n])
    for n in range(len(value_bytes)):
        with pytest.raises(ValueError):
            decode_consumer_value(key, value_bytes[:n])


@pytest.mark.parametrize("key, data_hex, why", [
    (ConsumerGroupRegularExpressionKey("g", "r"), "0000" "ffffffff0f", "a 2^32-item array in 5 bytes"),
    (ConsumerGroupTargetAssignmentMemberKey("g", "m"), "0000" "05" + "00" * 40, "4 topics cannot fit 40 bytes"),
    (ConsumerGroupRegularExpressionKey("g", "r"), "0000" "ffffffffff01", "a varint over 5 bytes"),
    (ConsumerGroupMemberMetadataKey("g", "m"), "0000" "00" "00" "00", "a null client id"),
    (ConsumerGroupRegularExpressionKey("g", "r"), "0000" "02" "00" + "00" * 17, "a null topic name"),
    (ConsumerGroupRegularExpressionKey("g", "r"), "0000" "00" + "00" * 17, "a null topic array"),
    (ConsumerGroupMetadataKey("g"), "0000" "00000001" "01" "00" "04" "00000000", "an int64 tag of 4 bytes"),
    (ConsumerGroupMetadataKey("g"), "0000" "00000001" "01" "00" "09" "000000000000000000", "an int64 tag of 9 bytes"),
    (ConsumerGroupMetadataKey("g"), "0000" "00000001" "01" "05" "7f" "00", "a tag longer than the record"),
    (ConsumerGroupRegularExpressionKey("g", "r"), "0000" "02" "03" "c3" "28", "a string that is not UTF-8"),
])
def test_hostile_values_are_refused_cheaply(key, data_hex, why):
    with pytest.raises(ValueError):
        decode_consumer_value(key, bytes.fromhex(data_hex))


@pytest.mark.parametrize("key_hex", ["0003ffff", "0005" "0001" "67" "ffff", "0010" "0001" "67", "0007" "0005" "67"])
def test_null_or_short_key_strings_are_refused(key_hex):
    with pytest.raises(ValueError):
        decode_key(bytes.fromhex(key_hex))


# -- the store's replay dispatch ----------------------------------------------------------------

class Recorder:
    """The replay's side of a coordinator, recording what it is handed (what the coordinator
    makes of it is for the consumer coordinator's own tests)."""

    def __init__(self, consumer: bool = True) -> None:
        self.calls: list[tuple] = []
        if consumer:
            self.load_consumer_record = lambda key, value: self.calls.append(("consumer", key, value))

    def load_offset(self, key, value):
        self.calls.append(("offset", key, value))

    def load_group(self, group, value):
        self.calls.append(("group", group, value))


def _replay(tmp_path, records: list[tuple[bytes, bytes | None]], coordinator) -> int:
    from oncelog.config.settings import FsyncPolicy, LogConfig
    from oncelog.groups.store import OffsetsTopic

    async def run() -> int:
        parts = open_parts(str(tmp_path / "data"), LogConfig())
        logs, manager = parts.logs, parts.partitions
        topic = OffsetsTopic(manager, 1)
        topic.append("g", records, lambda _: None)
        count = topic.replay(coordinator)
        await manager.close()
        return count

    return asyncio.run(run())


def test_replay_hands_consumer_group_records_and_tombstones_to_the_coordinator(tmp_path, caplog):
    written = [(bytes.fromhex(k), bytes.fromhex(v)) for _k, k, _v, v in KAFKA_RECORDS[:5]]
    tombstone = (bytes.fromhex(KAFKA_RECORDS[2][1]), None)
    partition_metadata = (bytes.fromhex("0004" "0001" "67"), bytes.fromhex("000001" "00"))
    unreadable = (bytes.fromhex(KAFKA_RECORDS[1][1]), bytes.fromhex("0000" "0000"))
    offset = (bytes.fromhex("0001" "0001" "67" "0001" "74" "00000000"),
              bytes.fromhex("0003" "0000000000000005" "ffffffff" "0000" "0000000000000001"))
    coordinator = Recorder()
    assert _replay(tmp_path, [*written, tombstone, partition_metadata, unreadable, offset], coordinator) == 9
    consumer = [(k, v) for kind, k, v in coordinator.calls if kind == "consumer"]
    assert consumer == [(key, value) for key, _kh, value, _vh in KAFKA_RECORDS[:5]] + [(KAFKA_RECORDS[2][0], None)]
    assert [c[0] for c in coordinator.calls] == ["consumer"] * 6 + ["offset"]  # type 4 skipped
    assert "skipping unreadable __consumer_offsets record" in caplog.text


def test_replay_without_consumer_group_loading_still_loads_offsets(tmp_path):
    written = [(bytes.fromhex(k), bytes.fromhex(v)) for _k, k, _v, v in KAFKA_RECORDS[:3]]
    offset = (bytes.fromhex("0001" "0001" "67" "0001" "74" "00000000"),
              bytes.fromhex("0003" "0000000000000005" "ffffffff" "0000" "0000000000000001"))
    coordinator = Recorder(consumer=False)
    assert _replay(tmp_path, [*written, offset], coordinator) == 4
    assert [c[:2] for c in coordinator.calls] == [("offset", OffsetKey("g", "t", 0))]


# -- the records a live broker writes -----------------------------------------------------------
# live_run/check_live_run serve tests/kafka/test_consumer_records_kafka.py (Apache Kafka 4.4) too.

PARTITIONS = 6


@dataclass
class LiveRun:
    group: str
    topic: str
    topic_id: UUID
    member_ids: dict[str, str]  # member id -> "a", "b", "c"
    owned: dict[str, set[int]]  # "a" -> the partitions the client held when all had settled
    decoded: list[tuple]  # (key, value or None) of the group's consumer records, in log order
    offset_keys: list[OffsetKey]

    @property
    def metadata(self) -> dict[str, ConsumerGroupMemberMetadataValue]:
        return {self.member_ids[k.member_id]: v for k, v in self.decoded
                if isinstance(k, ConsumerGroupMemberMetadataKey) and v is not None}


def _topic_id(bootstrap: str, topic: str) -> UUID:
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: a dropped client fails its futures
    tid = admin.describe_topics(ck.TopicCollection([topic]))[topic].result(timeout=30).topic_id
    mask = (1 << 64) - 1
    return UUID(int=((tid.get_most_significant_bits() & mask) << 64) | (tid.get_least_significant_bits() & mask))


def _consumer(bootstrap: str, group: str, client_id: str, protocol: str = "consumer", **extra):
    import confluent_kafka as ck

    return ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
                        "group.protocol": protocol, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                        **extra})


def _poll_until(consumers: list, done, what: str, timeout: float = 90.0) -> None:
    """Poll every consumer (they reconcile, revoke and rejoin only while polled) until ``done()``."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            sizes = [len(c.assignment()) for c in consumers]
            raise AssertionError(f"{what}: not reached in {timeout:.0f} s (assignment sizes {sizes})")
        for c in consumers:
            c.poll(0.1)


def read_offsets_topic(bootstrap: str) -> list[tuple[bytes, bytes | None]]:
    """Every record of ``__consumer_offsets``, each partition from its start to its end (a plain
    assign: librdkafka reads an internal topic so)."""
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient

    from ..helpers import unique

    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = admin.list_topics("__consumer_offsets", timeout=30).topics["__consumer_offsets"].partitions
    reader = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("raw-reader"),
                          "enable.auto.commit": False, "enable.partition.eof": True})
    reader.assign([ck.TopicPartition("__consumer_offsets", p, ck.OFFSET_BEGINNING) for p in partitions])
    records, at_end = [], set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < len(partitions):
            assert time.monotonic() < deadline, f"__consumer_offsets not read to its end: {len(at_end)} partitions"
            msg = reader.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == ck.KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            records.append((msg.key(), msg.value()))
    finally:
        reader.close()
    return records


def live_run(bootstrap: str, *, classic_member: bool) -> LiveRun:
    """A group on a live broker: A (consumer protocol, by name) reads a record and commits after
    it; B (static, by regular expression) joins, so A revokes half; with ``classic_member``, C
    (classic protocol) joins too. All leave. Then every record of the group in
    ``__consumer_offsets`` is decoded, and each key and value re-encoded to its very bytes."""
    import confluent_kafka as ck

    from ..helpers import create_topic, unique, wait_for_partitions

    topic, group = unique("records"), unique("records-group")
    create_topic(bootstrap, topic, PARTITIONS)
    wait_for_partitions(bootstrap, topic, PARTITIONS)
    topic_id = _topic_id(bootstrap, topic)
    producer = ck.Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"x", partition=0)
    assert producer.flush(30) == 0

    a = _consumer(bootstrap, group, "client-a")
    a.subscribe([topic])
    msg = None
    deadline = time.monotonic() + 90
    while msg is None or msg.error():
        assert time.monotonic() < deadline, "A read nothing"
        msg = a.poll(0.5)
    a.commit(message=msg, asynchronous=False)
    _poll_until([a], lambda: len(a.assignment()) == PARTITIONS, "A owns every partition")
    b = _consumer(bootstrap, group, "client-b", **{"group.instance.id": "instance-b"})
    b.subscribe([f"^{topic}$"])
    _poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == PARTITIONS // 2, "A and B share")
    members = [a, b]
    if classic_member:
        c = _consumer(bootstrap, group, "client-c", protocol="classic", **{"session.timeout.ms": 10000})
        c.subscribe([topic])
        members.append(c)
        _poll_until(members, lambda: all(len(m.assignment()) == PARTITIONS // 3 for m in members), "A, B, C share")
    member_ids = {m.memberid(): name for m, name in zip(members, "abc")}
    owned = {name: {tp.partition for tp in m.assignment()} for m, name in zip(members, "abc")}
    assert len(member_ids) == len(members) and set().union(*owned.values()) == set(range(PARTITIONS))
    for m in members:
        m.close()

    decoded, offset_keys = [], []
    for key_bytes, value_bytes in read_offsets_topic(bootstrap):
        key = decode_key(key_bytes)
        if getattr(key, "group", None) != group:
            continue
        if isinstance(key, OffsetKey):
            offset_keys.append(key)
            continue
        assert isinstance(key, CONSUMER_KEYS), key
        assert encode_key(key) == key_bytes
        value = None if value_bytes is None else decode_consumer_value(key, value_bytes)
        if value is not None:
            assert encode_consumer_value(value) == value_bytes, (key, value, value_bytes.hex())
        decoded.append((key, value))
    return LiveRun(group, topic, topic_id, member_ids, owned, decoded, offset_keys)


def check_live_run(run: LiveRun) -> None:
    """What every broker's records must hold, checked against what the clients know."""
    assert run.offset_keys == [OffsetKey(run.group, run.topic, 0)]  # A's commit
    types = {record_type(k) for k, _ in run.decoded}
    assert types >= {3, 5, 6, 7, 8}, types

    # member-scoped records name the clients' members; every one ends in a tombstone except the
    # static member's (its leave, epoch -2, keeps them until its session ends)
    last: dict = {}
    for key, value in run.decoded:
        if hasattr(key, "member_id"):
            assert key.member_id in run.member_ids, key
        last[key] = value
    for key, value in last.items():
        if hasattr(key, "member_id") and run.member_ids[key.member_id] != "b":
            assert value is None, (key, value)

    metadata = run.metadata
    assert {name: v.client_id for name, v in metadata.items()} == {
        name: f"client-{name}" for name in run.member_ids.values()}
    assert metadata["a"].subscribed_topic_names == (run.topic,) and metadata["a"].classic_member_metadata is None
    assert metadata["b"].instance_id == "instance-b" and metadata["b"].subscribed_topic_names == ()
    regex = metadata["b"].subscribed_topic_regex
    assert regex is not None and run.topic in regex  # librdkafka sends it parenthesised
    # B's regex as resolved (type 16): the group's one topic
    regexes = [(k, v) for k, v in run.decoded if isinstance(k, ConsumerGroupRegularExpressionKey) and v is not None]
    assert regexes and all(k.regex == regex and v.topics == (run.topic,) for k, v in regexes), regexes

    # topic ids and partitions: the last target assignment before the first leave (after it, the
    # members still heartbeating may get a new one) is what the clients held
    first_leave = next(i for i, (k, v) in enumerate(run.decoded) if v is None or (
        isinstance(k, ConsumerGroupCurrentMemberAssignmentKey) and v.member_epoch < 0))
    steady = run.decoded[:first_leave]
    targets = {run.member_ids[k.member_id]: v.topic_partitions for k, v in steady
               if isinstance(k, ConsumerGroupTargetAssignmentMemberKey)}
    assert targets == {name: {run.topic_id: frozenset(parts)} for name, parts in run.owned.items()}
    currents = [(run.member_ids[k.member_id], v) for k, v in steady
                if isinstance(k, ConsumerGroupCurrentMemberAssignmentKey)]
    for _, v in currents:
        assert set(v.assigned_partitions) | set(v.partitions_pending_revocation) <= {run.topic_id}
    assert any(name == "a" and v.partitions_pending_revocation and v.state == 1 for name, v in currents)
    assert any(name == "a" and v.assigned_partitions.get(run.topic_id) == frozenset(run.owned["a"])
               for name, v in currents)

    # epochs: a member's epoch is never above the group epoch written before it; assignment
    # epochs never above the member's
    group_epoch = 0
    for key, value in run.decoded:
        if isinstance(key, ConsumerGroupMetadataKey) and value is not None:
            assert value.epoch > group_epoch
            group_epoch = value.epoch
        elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey) and value is not None:
            assert value.assignment_epoch <= group_epoch
        elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey) and value is not None:
            assert value.member_epoch <= group_epoch
            for epochs in (*value.assigned_epochs.values(), *value.pending_revocation_epochs.values()):
                assert all(e <= max(value.member_epoch, 0) for e in epochs.values())


def test_oncelog_written_consumer_group_records_decode_and_reencode_byte_for_byte(broker):
    """The same group on oncelog (the classic member aside: oncelog refuses a classic member into a
    non-empty consumer group, Kafka 4.4 takes it), B's resolved regex (type 16) included."""
    check_live_run(live_run(broker.bootstrap, classic_member=False))
