"""The consumer protocol's bytes for classic members of KIP-848 consumer groups (Kafka 4.x's
migration path, :mod:`oncelog.groups.migration`): a JoinGroup's ConsumerProtocolSubscription
v0-3 (topics, and from v1 the partitions the member still owns), a SyncGroup's
ConsumerProtocolAssignment, and partitions by topic name <-> by topic id. Pure functions: bytes
that do not parse are None, which the migration answers as Kafka does.
"""

from __future__ import annotations

import struct
from typing import Mapping

from ..protocol.internal_records import Reader
from .consumer_state import Partitions, TopicId


def parse_subscription(meta: bytes) -> tuple[int, tuple[str, ...], dict[str, frozenset[int]]] | None:
    """ConsumerProtocolSubscription v0-3: (version, topics, owned partitions by topic name); None
    if it does not parse (the JoinGroup is then INCONSISTENT_GROUP_PROTOCOL, as Kafka answers)."""
    try:
        r = Reader(meta)
        version = r.i16()
        if version < 0:
            return None
        topics = tuple(t for t in r.array(Reader.string) if t is not None)
        r.bytes_()  # user data
        owned: dict[str, frozenset[int]] = {}
        if version >= 1:
            for topic, parts in r.array(lambda rr: (rr.string(), rr.array(Reader.i32))):
                if topic is not None:
                    owned[topic] = owned.get(topic, frozenset()) | frozenset(parts)
        return version, topics, owned
    except (ValueError, UnicodeDecodeError, struct.error):
        return None


def parse_assignment(data: bytes) -> dict[str, frozenset[int]] | None:
    """ConsumerProtocolAssignment (every version starts so): partitions by topic name; None if it
    does not parse."""
    try:
        r = Reader(data)
        if r.i16() < 0:
            return None
        out: dict[str, frozenset[int]] = {}
        for topic, parts in r.array(lambda rr: (rr.string(), rr.array(Reader.i32))):
            if topic is not None:
                out[topic] = out.get(topic, frozenset()) | frozenset(parts)
        return out
    except (ValueError, UnicodeDecodeError, struct.error):
        return None


def encode_assignment(partitions: Mapping[str, frozenset[int]], version: int) -> bytes:
    """ConsumerProtocolAssignment at ``version`` (0-3 share this layout): topics and partitions,
    no user data."""
    out = [struct.pack(">hi", max(0, min(version, 3)), len(partitions))]
    for topic in sorted(partitions):
        name = topic.encode()
        ps = sorted(partitions[topic])
        out.append(struct.pack(">h", len(name)) + name + struct.pack(">i", len(ps)) +
                   b"".join(struct.pack(">i", p) for p in ps))
    out.append(struct.pack(">i", -1))
    return b"".join(out)


def by_id(partitions: Mapping[str, frozenset[int]], topics: Mapping[str, tuple[TopicId, int]]) -> Partitions:
    """Partitions by topic name -> by topic id (topics that do not exist are left out)."""
    return {topics[t][0]: frozenset(ps) for t, ps in partitions.items() if t in topics and ps}


def by_name(partitions: Partitions, topics: Mapping[str, tuple[TopicId, int]]) -> dict[str, frozenset[int]]:
    names = {tid: name for name, (tid, _) in topics.items()}
    return {names[t]: ps for t, ps in partitions.items() if t in names}
