"""Key/value formats of the records in ``__consumer_offsets``, as Kafka writes them.

    OffsetCommitKey    v1: int16 version, string group, string topic, int32 partition
    OffsetCommitValue  v3: int16 version, int64 offset, int32 leader_epoch, string metadata,
                           int64 commit_timestamp
    GroupMetadataKey   v2: int16 version, string group
    GroupMetadataValue v3: int16 version, string protocol_type, int32 generation,
                           nullable string protocol, nullable string leader,
                           int64 current_state_timestamp, array of members:
                           (string member_id, nullable string group_instance_id,
                            string client_id, string client_host, int32 rebalance_timeout,
                            int32 session_timeout, bytes subscription, bytes assignment)

Strings are int16-length-prefixed UTF-8 (-1 = null), bytes int32-prefixed, arrays int32-counted
(the codec of :mod:`oncelog.protocol.internal_records`); a null offset metadata reads as "".
A null value (tombstone) deletes the key. Using Kafka's formats keeps the topic readable by
Kafka tooling and documents itself by reference. The values of consumer (KIP-848) groups' records
are :mod:`.consumer_records`'.

Keys are this module's alone, of every record type (:func:`encode_key`, :func:`decode_key`): an
int16 that names the record type (Kafka's ``CoordinatorRecordType``; before Kafka 4.0 the key
schema's version, whence 0 and 1 for one layout), then the key's fields in the classic encoding,
strings never null:

    type  key                                      fields
    0, 1  OffsetCommitKey (written as 1)           group, topic, int32 partition
    2     GroupMetadataKey                         group
    3     ConsumerGroupMetadataKey                 group
    4     ConsumerGroupPartitionMetadataKey        group (deprecated: decoded, never written)
    5     ConsumerGroupMemberMetadataKey           group, member_id
    6     ConsumerGroupTargetAssignmentMetadataKey group
    7     ConsumerGroupTargetAssignmentMemberKey   group, member_id
    8     ConsumerGroupCurrentMemberAssignmentKey  group, member_id
    16    ConsumerGroupRegularExpressionKey        group, regex
    17, 19-23  streams groups' keys (:mod:`.streams_records`)

Other types (share groups', 9-15, and 18, unused in Kafka 4.4) are refused.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..protocol.internal_records import Reader, Writer
from . import consumer_records as cr
from . import streams_records as sr

OFFSET_KEY_VERSION = 1  # the record type an offset commit key is written with (0 is read too)
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass(frozen=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


@dataclass(frozen=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp: int
    members: tuple[MemberRecord, ...]


# -- keys: one codec for every record type ------------------------------------------------------

def _key_layout(cls: type, kinds: str) -> tuple[tuple[str, str], ...]:
    """``cls``'s fields in order, each with its kind: "s" a string, "i" an int32."""
    names = [f.name for f in fields(cls)]
    assert len(names) == len(kinds), (cls, kinds)
    return tuple(zip(names, kinds))


# key class -> (the record type it is written with, its fields)
_KEYS: dict[type, tuple[int, tuple[tuple[str, str], ...]]] = {
    cls: (record_type, _key_layout(cls, kinds)) for cls, record_type, kinds in [
        (OffsetKey, OFFSET_KEY_VERSION, "ssi"),
        (GroupKey, GROUP_KEY_VERSION, "s"),
        (cr.ConsumerGroupMetadataKey, cr.CONSUMER_GROUP_METADATA, "s"),
        (cr.ConsumerGroupPartitionMetadataKey, cr.CONSUMER_GROUP_PARTITION_METADATA, "s"),
        (cr.ConsumerGroupMemberMetadataKey, cr.CONSUMER_GROUP_MEMBER_METADATA, "ss"),
        (cr.ConsumerGroupTargetAssignmentMetadataKey, cr.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, "s"),
        (cr.ConsumerGroupTargetAssignmentMemberKey, cr.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, "ss"),
        (cr.ConsumerGroupCurrentMemberAssignmentKey, cr.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "ss"),
        (cr.ConsumerGroupRegularExpressionKey, cr.CONSUMER_GROUP_REGULAR_EXPRESSION, "ss"),
        *sr.KEY_LAYOUTS,  # streams groups' (17, 19-23)
    ]
}
# record type -> key class; an offset commit key v0 has v1's layout
_KEY_CLASSES: dict[int, type] = {0: OffsetKey} | {record_type: cls for cls, (record_type, _) in _KEYS.items()}


def record_type(key) -> int:
    """The record type ``key`` is written with; TypeError if it is not a ``__consumer_offsets`` key."""
    try:
        return _KEYS[type(key)][0]
    except KeyError:
        raise TypeError(f"not a __consumer_offsets key: {key!r}") from None


def encode_key(key) -> bytes:
    """The bytes of any ``__consumer_offsets`` key: its record type, then its fields."""
    w = Writer().i16(record_type(key))
    for name, kind in _KEYS[type(key)][1]:
        value = getattr(key, name)
        if kind == "i":
            w.i32(value)
        else:
            w.string(value)
    return w.to_bytes()


def _key_string(r: Reader) -> str:
    s = r.string()
    if s is None:
        raise ValueError("null string in a __consumer_offsets key")
    return s


def decode_key(data: bytes):
    """The key of a ``__consumer_offsets`` record: an OffsetKey, a GroupKey, or a consumer
    (KIP-848) group's key of :mod:`.consumer_records`. ValueError for any other record type,
    a null string, or unreadable bytes."""
    r = Reader(data)
    t = r.i16()
    cls = _KEY_CLASSES.get(t)
    if cls is None:
        raise ValueError(f"unknown __consumer_offsets record type {t}")
    return cls(*(r.i32() if kind == "i" else _key_string(r) for _, kind in _KEYS[cls][1]))


def encode_offset_value(v: OffsetValue) -> bytes:
    w = Writer().i16(OFFSET_VALUE_VERSION)
    return w.i64(v.offset).i32(v.leader_epoch).string(v.metadata).i64(v.commit_timestamp).to_bytes()


def decode_offset_value(data: bytes) -> OffsetValue:
    r = Reader(data)
    version = r.i16()
    if version != OFFSET_VALUE_VERSION:
        raise ValueError(f"unsupported offset commit value version {version}")
    return OffsetValue(r.i64(), r.i32(), r.string() or "", r.i64())


def _write_member(w: Writer, m: MemberRecord) -> None:
    w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
    w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment)


def _read_member(r: Reader) -> MemberRecord:
    return MemberRecord(r.string(), r.string(), r.string(), r.string(), r.i32(), r.i32(), r.bytes_(), r.bytes_())


def encode_group_value(v: GroupValue) -> bytes:
    w = Writer().i16(GROUP_VALUE_VERSION).string(v.protocol_type).i32(v.generation).string(v.protocol)
    return w.string(v.leader).i64(v.state_timestamp).array(v.members, _write_member).to_bytes()


def decode_group_value(data: bytes) -> GroupValue:
    r = Reader(data)
    version = r.i16()
    if version != GROUP_VALUE_VERSION:
        raise ValueError(f"unsupported group metadata value version {version}")
    protocol_type, generation, protocol, leader, ts = r.string(), r.i32(), r.string(), r.string(), r.i64()
    return GroupValue(protocol_type or "", generation, protocol, leader, ts, tuple(r.array(_read_member)))
