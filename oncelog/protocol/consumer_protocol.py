"""The consumer protocol's bytes inside a classic group's messages (Kafka's ``ConsumerProtocol``):
the ConsumerProtocolSubscription a member puts in its JoinGroup, and the
ConsumerProtocolAssignment the leader hands out in SyncGroup (and DescribeGroups shows).

    Subscription v0-3: int16 version, [string topic], bytes user_data,
                       v1+: [string topic, [int32 partition]] owned partitions,
                       v2+: int32 generation, v3+: nullable string rack_id
    Assignment v0-3:   int16 version, [string topic, [int32 partition]], bytes user_data

Every version starts as v0 does, so a reader of the fields below reads them all (later fields
are ignored). The classic encoding of :mod:`.internal_records`. Parsers return None for bytes
that do not parse, a negative version among them (Kafka's ConsumerProtocol refuses one); the
caller decides what that means. A null topic name is skipped; a topic listed twice has the union
of its partitions.
"""

from __future__ import annotations

from typing import Mapping

from .internal_records import Reader, Writer


def _topic_partitions(r: Reader) -> dict[str, frozenset[int]]:
    out: dict[str, frozenset[int]] = {}
    for topic, parts in r.array(lambda rr: (rr.string(), rr.array(Reader.i32))):
        if topic is not None:
            out[topic] = out.get(topic, frozenset()) | frozenset(parts)
    return out


def parse_subscription(meta: bytes) -> tuple[int, tuple[str, ...], dict[str, frozenset[int]]] | None:
    """ConsumerProtocolSubscription v0-3: (version, topics, owned partitions by topic name; none
    before v1); None if it does not parse."""
    try:
        r = Reader(meta)
        version = r.i16()
        if version < 0:
            return None
        topics = tuple(t for t in r.array(Reader.string) if t is not None)
        r.bytes_()  # user data
        return version, topics, _topic_partitions(r) if version >= 1 else {}
    except ValueError:  # TruncatedRecord, UnicodeDecodeError
        return None


def parse_assignment(data: bytes) -> dict[str, frozenset[int]] | None:
    """ConsumerProtocolAssignment (any version): partitions by topic name; None if it does not
    parse (empty bytes among them: a member the leader has not assigned yet has those)."""
    try:
        r = Reader(data)
        if r.i16() < 0:
            return None
        return _topic_partitions(r)
    except ValueError:  # TruncatedRecord, UnicodeDecodeError
        return None


def encode_assignment(partitions: Mapping[str, frozenset[int]], version: int) -> bytes:
    """ConsumerProtocolAssignment at ``version`` (clamped to 0-3, which share this layout): topics
    in name order, partitions ascending, null user data."""
    w = Writer().i16(max(0, min(version, 3)))
    w.array(sorted(partitions), lambda w, t: w.string(t).array(sorted(partitions[t]), Writer.i32))
    return w.i32(-1).to_bytes()
