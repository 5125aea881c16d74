"""The bytes of ``__consumer_offsets`` records, pinned: the literals below were written by the
codec before the internal-record codec moved to :mod:`oncelog.protocol.internal_records`,
so records written by an older oncelog still replay, and new ones are byte-identical."""

from __future__ import annotations

from tests.broker_parts import open_parts

import pytest

from oncelog.groups.records import (
    GroupKey,
    GroupValue,
    MemberRecord,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
)
from oncelog.partition.internal_topic import java_string_hash, partition_for

SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x02t1\xff\xff\xff\xff"

KEYS = [
    (OffsetKey("group-é", "orders", 7), "0001000867726f75702dc3a900066f726465727300000007"),
    (GroupKey("group-é"), "0002000867726f75702dc3a9"),
]

OFFSET_VALUES = [
    (OffsetValue(1234567890123, 5, "meta-ü", 1700000000000),
     "00030000011f71fb04cb0000000500076d6574612dc3bc0000018bcfe56800"),
    (OffsetValue(-1, -1, "", 0), "0003ffffffffffffffffffffffff00000000000000000000"),
]

GROUP_VALUES = [
    (GroupValue("consumer", 3, "range", "m-1", 1700000000001, (
        MemberRecord("m-1", None, "client-1", "/127.0.0.1", 30000, 10000, SUBSCRIPTION, b"\x00\x00assign"),
        MemberRecord("m-2", "instance-2", "client-2", "/10.0.0.2", 60000, 45000, b"", b""),
    )),
     "00030008636f6e73756d657200000003000572616e676500036d2d310000018bcfe568010000000200036d2d31ffff0008636c69656e"
     "742d31000a2f3132372e302e302e3100007530000027100000000e00000000000100027431ffffffff00000008000061737369676e00"
     "036d2d32000a696e7374616e63652d320008636c69656e742d3200092f31302e302e302e320000ea600000afc80000000000000000"),
    (GroupValue("", 4, None, None, 42, ()), "0003000000000004ffffffff000000000000002a00000000"),
]


@pytest.mark.parametrize("key, golden", KEYS)
def test_keys_are_byte_identical(key, golden):
    assert encode_key(key).hex() == golden
    assert decode_key(bytes.fromhex(golden)) == key


@pytest.mark.parametrize("value, golden", OFFSET_VALUES)
def test_offset_values_are_byte_identical(value, golden):
    assert encode_offset_value(value).hex() == golden
    assert decode_offset_value(bytes.fromhex(golden)) == value


@pytest.mark.parametrize("value, golden", GROUP_VALUES)
def test_group_values_are_byte_identical(value, golden):
    assert encode_group_value(value).hex() == golden
    assert decode_group_value(bytes.fromhex(golden)) == value


def test_offset_key_v0_and_null_metadata_still_decode():
    """Kafka's v0 offset key has the v1 layout; a null metadata string reads as ""."""
    assert decode_key(bytes.fromhex("0000" + KEYS[0][1][4:])) == KEYS[0][0]
    assert decode_offset_value(bytes.fromhex("0003" + "00" * 8 + "00000000" + "ffff" + "00" * 8)) == OffsetValue(0, 0, "", 0)


def test_unknown_versions_are_refused():
    with pytest.raises(ValueError):  # type 9, a share group's: types 3-8 and 16 are consumer groups'
        decode_key(bytes.fromhex("0009000167"))
    with pytest.raises(ValueError):
        decode_offset_value(bytes.fromhex("0002" + OFFSET_VALUES[0][1][4:]))
    with pytest.raises(ValueError):
        decode_group_value(bytes.fromhex("0002" + GROUP_VALUES[1][1][4:]))


@pytest.mark.parametrize("key_hex", ["0001ffff00017400000000", "0001000167ffff00000000", "0002ffff"])
def test_null_strings_in_classic_keys_are_refused(key_hex):
    """As in a consumer group's key (one key codec): Kafka's key fields are never null."""
    with pytest.raises(ValueError, match="null"):
        decode_key(bytes.fromhex(key_hex))


def test_only_keys_encode_as_keys():
    with pytest.raises(TypeError):
        encode_key(OffsetValue(0, 0, "", 0))


@pytest.mark.parametrize("key, hash_code, of_50, of_7, legacy_50, legacy_7", [
    ("", 0, 0, 0, 0, 0),
    ("g", 103, 3, 5, 3, 5),
    ("group-é", 293427483, 33, 6, 33, 6),
    ("my-transactional-id", -959806496, 46, 5, 2, 4),
    ("\U0001F600emoji", -1233692477, 27, 3, 21, 6),  # a surrogate pair: two UTF-16 code units
    ("a" * 40, 1042809472, 22, 5, 22, 5),
    ("polygenelubricants", -(1 << 31), 0, 0, 0, 0),  # Integer.MIN_VALUE: Kafka's Utils.abs makes it 0
])
def test_a_key_stays_on_its_partition(key, hash_code, of_50, of_7, legacy_50, legacy_7):
    """Where a group's (or transactional id's) records live is part of the format: Java's
    String.hashCode, then Kafka's ``Utils.abs(h) % n`` (the partitions and hashes were taken
    with Java 17: ``Math.abs("my-transactional-id".hashCode()) % 50`` is 46); data directories
    an older oncelog wrote keep its ``(h & 0x7fffffff) % n`` (``legacy``), which differs for a
    negative hash."""
    assert java_string_hash(key) == hash_code
    assert (partition_for(key, 50), partition_for(key, 7)) == (of_50, of_7)
    assert (partition_for(key, 50, "legacy"), partition_for(key, 7, "legacy")) == (legacy_50, legacy_7)


def _opened(data_dir):
    """The data directory's metadata, opened with its logs as a broker opens them."""
    return open_parts(str(data_dir)).metadata


def test_the_placement_is_kafkas_for_a_new_data_dir_and_legacy_for_an_old_one(tmp_path):
    """A new data directory records ``kafka`` in meta.json; one an older oncelog wrote (no
    placement in meta.json, internal topics present) gets ``legacy``, recorded; one with no
    internal topic yet gets ``kafka``; an unknown placement is refused at start."""
    import json

    from oncelog.metadata import DataDirMismatch

    new = _opened(tmp_path / "new")
    assert new.internal_placement == "kafka"
    assert json.loads((tmp_path / "new" / "meta.json").read_text())["internal_placement"] == "kafka"

    old = tmp_path / "old"
    _opened(old).topics.create_topic("__consumer_offsets", 3, configs={"cleanup.policy": "compact"}, strict=False)
    meta = json.loads((old / "meta.json").read_text())
    del meta["internal_placement"]
    (old / "meta.json").write_text(json.dumps(meta))
    assert _opened(old).internal_placement == "legacy"
    assert json.loads((old / "meta.json").read_text())["internal_placement"] == "legacy"
    assert _opened(old).internal_placement == "legacy"

    bare = tmp_path / "bare"
    _opened(bare).topics.create_topic("events", 1)
    meta = json.loads((bare / "meta.json").read_text())
    del meta["internal_placement"]
    (bare / "meta.json").write_text(json.dumps(meta))
    assert _opened(bare).internal_placement == "kafka"

    meta["internal_placement"] = "murmur"
    (bare / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DataDirMismatch, match="internal_placement 'murmur'"):
        _opened(bare)


def test_records_written_before_replay_into_the_coordinator(tmp_path):
    """Golden records in ``__consumer_offsets`` (a plain and a committed transactional offset
    commit, group metadata) replay into the coordinator's state."""
    import asyncio

    from oncelog.config.settings import FsyncPolicy, LogConfig
    from oncelog.groups.coordinator import GroupCoordinator
    from oncelog.groups.store import OffsetsTopic

    async def run():
        parts = open_parts(str(tmp_path / "data"), LogConfig())
        logs, manager = parts.logs, parts.partitions
        topic = OffsetsTopic(manager, 1)
        done = []
        offset_key, group_key = (bytes.fromhex(golden) for _, golden in KEYS)
        topic.persist("group-é", [(offset_key, bytes.fromhex(OFFSET_VALUES[1][1])),
                                  (group_key, bytes.fromhex(GROUP_VALUES[0][1]))], done.append)
        txn_key = encode_key(OffsetKey("group-é", "orders", 8))
        topic.persist_transactional("group-é", 1000, 0, [(txn_key, bytes.fromhex(OFFSET_VALUES[0][1]))], done.append)
        manager.get("__consumer_offsets", 0).append_marker(1000, 0, True, 0, 2000)
        assert done == [None, None]
        coordinator = GroupCoordinator(lambda: 5000, lambda *_: None)
        assert topic.replay(coordinator) == 3
        group = coordinator.groups["group-é"]
        assert group.offsets == {("orders", 7): OFFSET_VALUES[1][0], ("orders", 8): OFFSET_VALUES[0][0]}
        assert (group.state.value, group.generation, group.protocol_name, group.leader_id) == ("Stable", 3, "range", "m-1")
        assert [(m.member_id, m.group_instance_id, m.protocols) for m in group.members.values()] == [
            ("m-1", None, [("range", SUBSCRIPTION)]), ("m-2", "instance-2", [("range", b"")])]
        assert group.static_members == {"instance-2": "m-2"}
        await manager.close()

    asyncio.run(run())


def test_consumer_subscription_topics_on_the_shared_codec():
    """ConsumerProtocolSubscription (v0: topics, user data; v1+ adds owned partitions after):
    only the topics are read; unreadable metadata gives None (subscriptions unknown: Kafka's
    ClassicGroup.computeSubscribedTopics, so OffsetDelete treats every topic as subscribed)."""
    from oncelog.groups.state import consumer_subscription_topics

    assert consumer_subscription_topics(SUBSCRIPTION) == {"t1"}
    v1 = bytes.fromhex("0001" "00000002" "0001" "61" "0002" "c3a9" "ffffffff" "00000001" "0001" "61" "00000001" "00000000")
    assert consumer_subscription_topics(v1) == {"a", "é"}
    assert consumer_subscription_topics(b"\x00\x00\x00\x00\x00\x05\x00") is None  # truncated
    assert consumer_subscription_topics(b"") is None
