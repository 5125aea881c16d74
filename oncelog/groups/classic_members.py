"""Classic-protocol members in KIP-848 consumer groups (Kafka 4.x's migration path): a consumer
using JoinGroup/SyncGroup/Heartbeat (kafka-python, aiokafka, librdkafka's classic protocol) may
join a consumer group, and a consumer-protocol member may join a classic group with members,
which is converted to a consumer group online — so an application's consumers can move to
``group.protocol=consumer`` one at a time. Sans-IO helpers for
:class:`~oncelog.groups.consumer_coordinator.ConsumerGroupCoordinator`: the consumer protocol's
subscription and assignment bytes (ConsumerProtocolSubscription v0-3, ConsumerProtocolAssignment).

How a classic member is served, as Kafka's GroupMetadataManager does:

* JoinGroup: its subscription (the topics, and from v1 the partitions it still owns) becomes the
  member's; the group epoch and target assignment move as for any member; the member is
  reconciled with what it says it owns (an eager client has revoked everything). The answer's
  generation is the member epoch; no leader assigns: the coordinator did.
* SyncGroup: its assigned partitions, as a ConsumerProtocolAssignment.
* Heartbeat: REBALANCE_IN_PROGRESS while the member is not reconciled to the group's epoch, so it
  rejoins (revoking as its assignor says) until it has its whole target.
* LeaveGroup: removed as a consumer-protocol member's leave (epoch -1).
* Offset commits: by generation = member epoch; a mismatch is ILLEGAL_GENERATION.
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
