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

Strings are int16-length-prefixed UTF-8 (-1 = null), bytes int32-prefixed, arrays int32-counted.
A null value (tombstone) deletes the key. Using Kafka's formats keeps the topic readable by
Kafka tooling and documents itself by reference.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2


class _Writer:
    def __init__(self) -> None:
        self.buf = bytearray()

    def i16(self, v): self.buf += struct.pack(">h", v); return self
    def i32(self, v): self.buf += struct.pack(">i", v); return self
    def i64(self, v): self.buf += struct.pack(">q", v); return self

    def string(self, s):
        if s is None:
            return self.i16(-1)
        b = s.encode()
        self.i16(len(b))
        self.buf += b
        return self

    def bytes_(self, b):
        self.i32(len(b))
        self.buf += b
        return self


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def _take(self, fmt):
        v = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def i16(self): return self._take(">h")
    def i32(self): return self._take(">i")
    def i64(self): return self._take(">q")

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        s = self.buf[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def bytes_(self):
        n = self.i32()
        b = self.buf[self.pos : self.pos + max(n, 0)]
        self.pos += max(n, 0)
        return bytes(b)


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
        return bytes(_Writer().i16(OFFSET_KEY_VERSION).string(key.group).string(key.topic).i32(key.partition).buf)
    return bytes(_Writer().i16(GROUP_KEY_VERSION).string(key.group).buf)


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupKey(r.string())
    raise ValueError(f"unknown __consumer_offsets key version {version}")


def encode_offset_value(v: OffsetValue) -> bytes:
    return bytes(_Writer().i16(3).i64(v.offset).i32(v.leader_epoch).string(v.metadata).i64(v.commit_timestamp).buf)


def decode_offset_value(data: bytes) -> OffsetValue:
    r = _Reader(data)
    version = r.i16()
    if version != 3:
        raise ValueError(f"unsupported offset commit value version {version}")
    return OffsetValue(r.i64(), r.i32(), r.string() or "", r.i64())


def encode_group_value(v: GroupValue) -> bytes:
    w = _Writer().i16(3).string(v.protocol_type).i32(v.generation).string(v.protocol).string(v.leader)
    w.i64(v.state_timestamp).i32(len(v.members))
    for m in v.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.buf)


def decode_group_value(data: bytes) -> GroupValue:
    r = _Reader(data)
    version = r.i16()
    if version != 3:
        raise ValueError(f"unsupported group metadata value version {version}")
    protocol_type, generation, protocol, leader, ts = r.string(), r.i32(), r.string(), r.string(), r.i64()
    members = tuple(
        MemberRecord(r.string(), r.string(), r.string(), r.string(), r.i32(), r.i32(), r.bytes_(), r.bytes_())
        for _ in range(r.i32())
    )
    return GroupValue(protocol_type or "", generation, protocol, leader, ts, members)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as Kafka uses to place a group."""
    h = 0
    for unit in struct.unpack(f">{len(s.encode('utf-16-be')) // 2}H", s.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_or_txn_id: str, partitions: int) -> int:
    """Kafka's Utils.abs(hashCode) % partitions (abs maps MIN_VALUE to 0... via & 0x7fffffff)."""
    return (java_string_hash(group_or_txn_id) & 0x7FFFFFFF) % partitions
