"""The ``__consumer_offsets`` records of consumer (KIP-848) groups, byte for byte as Apache Kafka
4.4 writes them (its ``coordinator.group.generated`` classes; checked against a live Kafka 4.4 in
tests/kafka/test_consumer_records_kafka.py).

A key is an int16 record type, then the key's fields in the classic encoding (int16-length
strings, never null): the key classes are here, their codec is :mod:`.records`' ``encode_key`` /
``decode_key``, the one of every ``__consumer_offsets`` record type. A value is an int16 version
(0 for every type here), then the FLEXIBLE encoding:

    compact string / bytes   unsigned varint (length + 1), then the bytes; 0 is null
    compact array            unsigned varint (count + 1), then the items; 0 is null
    uuid                     16 bytes
    tagged fields            unsigned varint count, then (varint tag, varint size, data) each;
                             every struct ends with them, a field at its default is not written

    type  key fields            value (version 0) fields
    3     group                 ConsumerGroupMetadata: int32 epoch; tag 0: int64 metadata_hash
                                (written when != 0)
    4     group                 ConsumerGroupPartitionMetadata (deprecated since 4.0, Kafka only
                                writes its tombstone): [topic_id, topic_name, int32 num_partitions,
                                [int32 partition, [racks]]] — decoded, never written
    5     group, member_id      ConsumerGroupMemberMetadata: ?instance_id, ?rack_id, client_id,
                                client_host, [subscribed_topic_names], ?subscribed_topic_regex,
                                int32 rebalance_timeout_ms, ?server_assignor; tag 0:
                                ?classic_member_metadata (int32 session_timeout_ms,
                                [name, bytes metadata])
    6     group                 ConsumerGroupTargetAssignmentMetadata: int32 assignment_epoch;
                                tag 0: int64 assignment_timestamp (written when != 0)
    7     group, member_id      ConsumerGroupTargetAssignmentMember: [uuid topic_id, [int32]]
    8     group, member_id      ConsumerGroupCurrentMemberAssignment: int32 member_epoch,
                                int32 previous_member_epoch, int8 state, assigned_partitions and
                                partitions_pending_revocation, each [uuid topic_id, [int32
                                partition]; tag 0: ?[int32 assignment_epochs]]
    16    group, regex          ConsumerGroupRegularExpression: [topics], int64 version,
                                int64 timestamp

(``?`` nullable; ``[...]`` a compact array.) A value of None is a tombstone: it deletes the key.

Two of Kafka's defaults are not null, and matter for byte-exactness:
- ``classic_member_metadata`` defaults to an *empty* struct, so Kafka writes a consumer-protocol
  member's null explicitly (tag 0, size 1, byte 0): ``None`` here, and the encoder's default.
  An absent tag decodes as Kafka reads it, ``ClassicMemberMetadata(0, ())``.
- ``assignment_epochs`` (Kafka 4.4: the member epoch at which each partition was assigned, which
  fences zombie offset commits) defaults to an empty list, written only when non-empty. Kafka
  reads a topic whose list is absent, null or not as long as its partitions as "every partition
  at max(member_epoch, 0)"; here such a topic has no entry in the epochs mapping.

Partition sets are ``frozenset``s, and order is not part of their meaning; but Kafka writes a
target assignment's partitions in its assignor's order (the uniform assignor's is not ascending:
[5, 2] was seen) and a current assignment's in its HashMap's. So decoding yields
:class:`PartitionSet`, a frozenset that remembers the order it was read in, and encoding writes
that order: a record Kafka wrote re-encodes byte for byte. A plain frozenset is written in
ascending order. Topics keep their order (dicts are ordered); so do topic-name lists.

Decoding raises ValueError and nothing else on any bytes: lengths and counts are checked against
what is left before anything is allocated (:class:`TruncatedRecord` is a ValueError, so is
UnicodeDecodeError), non-nullable fields refuse null, a known tagged field must fill its declared
size exactly. As Kafka, decoding skips unknown tagged fields and ignores trailing bytes.

Written by hand on :mod:`oncelog.protocol.internal_records` (with the flexible types added
here), as :mod:`.records` is: kio, the project's codec of API messages, has no schemas for the
coordinator's record types.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable, TypeVar

from ..protocol.internal_records import Reader, TruncatedRecord, Writer

T = TypeVar("T")


class PartitionSet(frozenset):
    """A frozenset of partitions that remembers the order it was written in (``written_order``),
    for byte-exact re-encoding; it compares and hashes as the frozenset it is. Set operations on
    it give plain frozensets."""

    __slots__ = ("written_order",)

    def __new__(cls, partitions=()):
        written = tuple(partitions)
        self = super().__new__(cls, written)
        self.written_order = written
        return self


def _partition_order(partitions: frozenset[int]) -> list[int]:
    if isinstance(partitions, PartitionSet):
        return list(partitions.written_order)
    return sorted(partitions)


Partitions = dict[uuid.UUID, frozenset[int]]
PartitionEpochs = dict[uuid.UUID, dict[int, int]]  # topic id -> partition -> assignment epoch

# record types (a key's leading int16; the key codec is :mod:`.records`')
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16
VALUE_VERSION = 0  # the only version of every value above in Kafka 4.4


# -- keys ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConsumerGroupMetadataKey:
    group: str


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataKey:
    """Deprecated (type 4): decoded so replay can skip it; oncelog never writes it."""
    group: str


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataKey:
    group: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupRegularExpressionKey:
    group: str
    regex: str


# The keys replay hands to the coordinator (type 4 is not among them: it is skipped).
CONSUMER_KEYS = (
    ConsumerGroupMetadataKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupRegularExpressionKey,
)

# -- values -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConsumerGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0  # Kafka 4.x: a hash of the subscribed topics' metadata; 0 = none


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """A member that joined with the classic protocol (JoinGroup) into a consumer group."""
    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]  # (name, metadata)


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_member_metadata: ClassicMemberMetadata | None = None  # None: a consumer-protocol member


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    assignment_timestamp: int = 0  # Kafka 4.4: when the assignment was computed (ms); 0 = not written


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: Partitions


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState: 0 stable, 1 unrevoked partitions, 2 unreleased partitions, 3 unknown
    assigned_partitions: Partitions
    partitions_pending_revocation: Partitions
    # Kafka 4.4's assignment epochs of each topic's partitions (see the module docstring); a topic
    # with none here is written without them. Each entry must cover exactly its topic's partitions.
    assigned_epochs: PartitionEpochs = field(default_factory=dict)
    pending_revocation_epochs: PartitionEpochs = field(default_factory=dict)


@dataclass(frozen=True)
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...]
    version: int  # the metadata image version the regex was resolved at
    timestamp: int  # when it was resolved (ms)


@dataclass(frozen=True)
class PartitionMetadataTopic:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataValue:
    """Deprecated (type 4), decoded only; the per-partition racks are read and dropped."""
    topics: tuple[PartitionMetadataTopic, ...]


# -- the flexible encoding ----------------------------------------------------------------------

class _FlexWriter(Writer):
    def uvarint(self, v: int) -> "_FlexWriter":
        if not 0 <= v < 1 << 32:
            raise ValueError(f"unsigned varint out of range: {v}")
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)
        return self

    def compact_string(self, s: str | None) -> "_FlexWriter":
        if s is None:
            return self.uvarint(0)
        return self.compact_bytes(s.encode())

    def compact_bytes(self, b: bytes) -> "_FlexWriter":
        self.uvarint(len(b) + 1)
        self.buf += b
        return self

    def uuid(self, u: uuid.UUID) -> "_FlexWriter":
        self.buf += u.bytes
        return self

    def compact_array(self, items, write: Callable[["_FlexWriter", T], object]) -> "_FlexWriter":
        items = list(items)
        self.uvarint(len(items) + 1)
        for item in items:
            write(self, item)
        return self

    def tags(self, tagged: dict[int, bytes]) -> "_FlexWriter":
        """The tagged-field section: ``tagged`` maps tag -> encoded data, written in tag order
        (Kafka's order: its known tags ascending)."""
        self.uvarint(len(tagged))
        for tag in sorted(tagged):
            self.uvarint(tag).uvarint(len(tagged[tag]))
            self.buf += tagged[tag]
        return self


def _encoded(write: Callable[[_FlexWriter], object]) -> bytes:
    w = _FlexWriter()
    write(w)
    return w.to_bytes()


class _FlexReader(Reader):
    def uvarint(self) -> int:
        v = shift = 0
        for _ in range(5):  # Kafka's limit: an int32 takes at most 5 bytes
            if self.pos >= len(self.buf):
                raise TruncatedRecord(f"{len(self.buf)}-byte record ends inside a varint at {self.pos}")
            b = self.buf[self.pos]
            self.pos += 1
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7
        raise ValueError(f"varint longer than 5 bytes at {self.pos - 5}")

    def _length(self, what: str) -> int | None:
        """A compact length (None for null), checked against what is left."""
        n = self.uvarint()
        if n == 0:
            return None
        n -= 1
        if n > len(self.buf) - self.pos:
            raise TruncatedRecord(f"{what} of {n} bytes at {self.pos} runs past the {len(self.buf)}-byte record")
        return n

    def compact_nullable_string(self) -> str | None:
        n = self._length("string")
        return None if n is None else self._span(n).decode()

    def compact_string(self) -> str:
        s = self.compact_nullable_string()
        if s is None:
            raise ValueError(f"null in a non-nullable string at {self.pos - 1}")
        return s

    def compact_bytes(self) -> bytes:
        n = self._length("bytes")
        if n is None:
            raise ValueError(f"null in non-nullable bytes at {self.pos - 1}")
        return self._span(n)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._span(16))

    def compact_nullable_array(self, read: Callable[["_FlexReader"], T], min_size: int) -> list[T] | None:
        """``min_size``: the fewest bytes one item takes, so that a count the rest of the record
        cannot hold is refused before any item is read (bounded work and memory)."""
        n = self.uvarint()
        if n == 0:
            return None
        n -= 1
        if n * min_size > len(self.buf) - self.pos:
            raise TruncatedRecord(f"array of {n} items at {self.pos} cannot fit the {len(self.buf)}-byte record")
        return [read(self) for _ in range(n)]

    def compact_array(self, read: Callable[["_FlexReader"], T], min_size: int) -> list[T]:
        items = self.compact_nullable_array(read, min_size)
        if items is None:
            raise ValueError(f"null in a non-nullable array at {self.pos - 1}")
        return items

    def tags(self, known: dict[int, Callable[["_FlexReader"], object]]) -> dict[int, object]:
        """The tagged-field section; ``known`` maps a tag to its reader, which must consume
        exactly the declared size. Unknown tags are skipped, as Kafka does."""
        found: dict[int, object] = {}
        for _ in range(self.uvarint()):  # each field takes >= 2 bytes: a huge count truncates soon
            tag = self.uvarint()
            size = self.uvarint()
            if size > len(self.buf) - self.pos:
                raise TruncatedRecord(f"tagged field {tag} of {size} bytes at {self.pos} runs past the record")
            if tag not in known:
                self.pos += size
                continue
            end = self.pos + size
            sub = _FlexReader(memoryview(self.buf)[:end], self.pos)  # cannot read past its size; no copy
            found[tag] = known[tag](sub)
            if sub.pos != end:
                raise ValueError(f"tagged field {tag} declares {size} bytes but holds {sub.pos - self.pos}")
            self.pos = end
        return found


# -- values: encode -----------------------------------------------------------------------------

def _write_partitions(w: _FlexWriter, partitions: Partitions, epochs: PartitionEpochs | None) -> None:
    def topic(w: _FlexWriter, item) -> None:
        topic_id, parts = item
        ordered = _partition_order(parts)
        w.uuid(topic_id).compact_array(ordered, Writer.i32)
        tags: dict[int, bytes] = {}
        if epochs is not None and topic_id in epochs:
            by_partition = epochs[topic_id]
            if set(by_partition) != set(ordered):
                raise ValueError(f"assignment epochs of topic {topic_id} cover {sorted(by_partition)}, "
                                 f"its partitions are {sorted(ordered)}")
            if ordered:  # an empty list is Kafka's default: not written
                tags[0] = _encoded(lambda t: t.compact_array([by_partition[p] for p in ordered], Writer.i32))
        w.tags(tags)
    w.compact_array(partitions.items(), topic)


def _write_classic(w: _FlexWriter, m: ClassicMemberMetadata) -> None:
    w.i32(m.session_timeout_ms)
    w.compact_array(m.supported_protocols, lambda w, p: w.compact_string(p[0]).compact_bytes(p[1]).tags({}))
    w.tags({})


def encode_consumer_value(value) -> bytes:
    """The value bytes (int16 version, then the fields) of a consumer group record value."""
    w = _FlexWriter().i16(VALUE_VERSION)
    if isinstance(value, ConsumerGroupMetadataValue):
        w.i32(value.epoch)
        w.tags({0: _encoded(lambda t: t.i64(value.metadata_hash))} if value.metadata_hash != 0 else {})
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        w.compact_string(value.instance_id).compact_string(value.rack_id)
        w.compact_string(value.client_id).compact_string(value.client_host)
        w.compact_array(value.subscribed_topic_names, _FlexWriter.compact_string)
        w.compact_string(value.subscribed_topic_regex).i32(value.rebalance_timeout_ms)
        w.compact_string(value.server_assignor)
        classic = value.classic_member_metadata
        if classic is None:
            w.tags({0: b"\x00"})  # Kafka's default is an empty struct, so null is written
        elif classic == ClassicMemberMetadata(0, ()):
            w.tags({})
        else:
            w.tags({0: _encoded(lambda t: _write_classic(t.uvarint(1), classic))})  # 1: not null
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        w.i32(value.assignment_epoch)
        w.tags({0: _encoded(lambda t: t.i64(value.assignment_timestamp))} if value.assignment_timestamp != 0 else {})
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        _write_partitions(w, value.topic_partitions, None)
        w.tags({})
    elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        w.i32(value.member_epoch).i32(value.previous_member_epoch).i8(value.state)
        _write_partitions(w, value.assigned_partitions, value.assigned_epochs)
        _write_partitions(w, value.partitions_pending_revocation, value.pending_revocation_epochs)
        w.tags({})
    elif isinstance(value, ConsumerGroupRegularExpressionValue):
        w.compact_array(value.topics, _FlexWriter.compact_string).i64(value.version).i64(value.timestamp)
        w.tags({})
    else:
        raise TypeError(f"not a consumer group record value: {value!r}")
    return w.to_bytes()


# -- values: decode -----------------------------------------------------------------------------

def _read_i64(r: _FlexReader) -> int:
    return r.i64()


def _read_partitions(r: _FlexReader, with_epochs: bool) -> tuple[Partitions, PartitionEpochs]:
    partitions: Partitions = {}
    epochs: PartitionEpochs = {}

    def topic(r: _FlexReader) -> None:
        topic_id = r.uuid()
        parts = r.compact_array(_FlexReader.i32, 4)
        tags = r.tags({0: lambda t: t.compact_nullable_array(_FlexReader.i32, 4)} if with_epochs else {})
        # A topic listed twice: the later entry wins, epochs included (Kafka fills a HashMap so).
        partitions[topic_id] = PartitionSet(parts)
        assignment_epochs = tags.get(0)
        if assignment_epochs and len(assignment_epochs) == len(parts):
            epochs[topic_id] = dict(zip(parts, assignment_epochs))
        else:  # Kafka takes max(member_epoch, 0) for every partition of the topic then
            epochs.pop(topic_id, None)

    r.compact_array(topic, 16 + 1 + 1)  # uuid, an empty array, no tags
    return partitions, epochs


def _read_classic(r: _FlexReader) -> ClassicMemberMetadata | None:
    if r.uvarint() == 0:  # a nullable struct's marker: Kafka writes 0 for null, 1 (reads > 0) present
        return None
    session_timeout_ms = r.i32()

    def protocol(r: _FlexReader) -> tuple[str, bytes]:
        name, metadata = r.compact_string(), r.compact_bytes()
        r.tags({})
        return name, metadata

    protocols = r.compact_array(protocol, 3)
    r.tags({})
    return ClassicMemberMetadata(session_timeout_ms, tuple(protocols))


def _read_topic_metadata(r: _FlexReader) -> PartitionMetadataTopic:
    topic_id, name, num_partitions = r.uuid(), r.compact_string(), r.i32()

    def partition(r: _FlexReader) -> None:
        r.i32()
        r.compact_array(_FlexReader.compact_string, 1)
        r.tags({})

    r.compact_array(partition, 4 + 1 + 1)
    r.tags({})
    return PartitionMetadataTopic(topic_id, name, num_partitions)


def decode_consumer_value(key, data: bytes):
    """The value of ``key``'s record type from ``data``; ValueError if the bytes are not one."""
    r = _FlexReader(data)
    version = r.i16()
    if version != VALUE_VERSION:
        raise ValueError(f"unsupported {type(key).__name__[:-3]} value version {version}")
    if isinstance(key, ConsumerGroupMetadataKey):
        epoch = r.i32()
        return ConsumerGroupMetadataValue(epoch, r.tags({0: _read_i64}).get(0, 0))
    if isinstance(key, ConsumerGroupMemberMetadataKey):
        instance_id, rack_id = r.compact_nullable_string(), r.compact_nullable_string()
        client_id, client_host = r.compact_string(), r.compact_string()
        topics = tuple(r.compact_array(_FlexReader.compact_string, 1))
        regex, rebalance_timeout_ms = r.compact_nullable_string(), r.i32()
        server_assignor = r.compact_nullable_string()
        tags = r.tags({0: _read_classic})
        classic = tags[0] if 0 in tags else ClassicMemberMetadata(0, ())  # absent: Kafka's default
        return ConsumerGroupMemberMetadataValue(instance_id, rack_id, client_id, client_host, topics, regex,
                                                rebalance_timeout_ms, server_assignor, classic)
    if isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        epoch = r.i32()
        return ConsumerGroupTargetAssignmentMetadataValue(epoch, r.tags({0: _read_i64}).get(0, 0))
    if isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        partitions, _ = _read_partitions(r, with_epochs=False)
        r.tags({})
        return ConsumerGroupTargetAssignmentMemberValue(partitions)
    if isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
        member_epoch, previous_member_epoch, state = r.i32(), r.i32(), r.i8()
        assigned, assigned_epochs = _read_partitions(r, with_epochs=True)
        pending, pending_epochs = _read_partitions(r, with_epochs=True)
        r.tags({})
        return ConsumerGroupCurrentMemberAssignmentValue(member_epoch, previous_member_epoch, state, assigned,
                                                         pending, assigned_epochs, pending_epochs)
    if isinstance(key, ConsumerGroupRegularExpressionKey):
        topics = tuple(r.compact_array(_FlexReader.compact_string, 1))
        version, timestamp = r.i64(), r.i64()
        r.tags({})
        return ConsumerGroupRegularExpressionValue(topics, version, timestamp)
    if isinstance(key, ConsumerGroupPartitionMetadataKey):
        topics = tuple(r.compact_array(_read_topic_metadata, 16 + 1 + 4 + 1 + 1))
        r.tags({})
        return ConsumerGroupPartitionMetadataValue(topics)
    raise TypeError(f"not a consumer group key: {key!r}")
