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
Kafka tooling and documents itself by reference. The records of consumer (KIP-848) groups, key
types 3-8 and 16, are :mod:`.consumer_records`'; :func:`decode_key` returns their keys too.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol.internal_records import Reader, Writer
from .consumer_records import decode_consumer_key

OFFSET_KEY_VERSION = 1
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


def encode_key(key: OffsetKey | GroupKey) -> bytes:
    if isinstance(key, OffsetKey):
        return Writer().i16(OFFSET_KEY_VERSION).string(key.group).string(key.topic).i32(key.partition).to_bytes()
    return Writer().i16(GROUP_KEY_VERSION).string(key.group).to_bytes()


def decode_key(data: bytes):
    """The key of a ``__consumer_offsets`` record: an OffsetKey, a GroupKey, or one of the consumer
    (KIP-848) group keys of :mod:`.consumer_records` (whose leading int16 Kafka 4.x calls the
    record type). ValueError for any other type or unreadable bytes."""
    r = Reader(data)
    version = r.i16()
    if version in (0, 1):  # v0 has v1's layout
        return OffsetKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupKey(r.string())
    return decode_consumer_key(version, r)  # ValueError for a type it does not know


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
