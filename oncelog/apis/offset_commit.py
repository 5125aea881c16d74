"""OffsetCommit (key 8), v2-10.

As Kafka's KafkaApis.handleOffsetCommitRequest: partitions of unknown topics and partitions a
topic does not have get UNKNOWN_TOPIC_OR_PARTITION first, without the group check, and are
answered first; if none is left the group coordinator is not asked (no simple group is made).
Then the group check (unknown member → UNKNOWN_MEMBER_ID, old generation → ILLEGAL_GENERATION,
fenced static member → FENCED_INSTANCE_ID, generation -1 for unmanaged groups, a generation for
an unknown group → GROUP_ID_NOT_FOUND from v9); if it fails every remaining partition gets that
error and nothing is stored. In a cluster of nodes (:mod:`oncelog.cluster`), a group another node
coordinates fails the group check with NOT_COORDINATOR, before the group is asked (no group is
made, nothing is stored). Metadata above ``offset.metadata.max.bytes`` (4096):
OFFSET_METADATA_TOO_LARGE. The group id "" is accepted (Kafka refuses only null here). The answer is sent once the commit record is durable.
v10 (KIP-848) names topics by id, in the request and the answer; offsets are still stored by
name. An unknown id gets UNKNOWN_TOPIC_ID for all its partitions, whatever the group check says
(Kafka resolves ids before the group coordinator sees the request).

ACLs (Kafka's KafkaApis.handleOffsetCommitRequest): READ on the group, else every partition is
GROUP_AUTHORIZATION_FAILED; READ on each topic, else its partitions are TOPIC_AUTHORIZATION_FAILED;
nothing is stored for a refused partition.

Version notes:

OffsetCommit: v2-10 (v0-1, deprecated by KIP-896, are not served)

- v2: the oldest served: the group's generation and member, a retention time.
- v3: the throttle time in the answer.
- v4: the schema of v3; the throttle is applied after the answer (KIP-219).
- v5: no retention time (the broker's ``offsets.retention.minutes``, KIP-211).
- v6: each partition's committed leader epoch (KIP-320).
- v7: ``group_instance_id`` (static membership, KIP-345).
- v8: flexible versions (compact strings and arrays, tagged fields).
- v9: the schema of v8, for consumer (KIP-848) groups too: STALE_MEMBER_EPOCH, GROUP_ID_NOT_FOUND.
- v10: topics by id, not name (KIP-848).
"""

from __future__ import annotations


from kio.schema.errors import ErrorCode

from .. import errors
from ..errors import KafkaError
from ..groups.records import OffsetValue
from . import _authz
from ._base import NO_THROTTLE, build, response_module, reply_later
from ._groups import error_code

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 10

OFFSET_METADATA_MAX_BYTES = 4096


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    broker = ctx.broker
    generation = getattr(request, "generation_id_or_member_epoch", None)
    if generation is None:
        generation = request.generation_id
    by_id = ctx.api_version >= 10
    names = [_name(broker, t) if by_id else t.name for t in request.topics]
    topic_ids = {name: getattr(t, "topic_id", None) for t, name in zip(request.topics, names)}
    # The answer as Kafka's OffsetCommitResponse.Builder makes it: per topic (in the order first
    # added) its partitions' codes; the partitions refused before the group is asked come first.
    answer: dict[str | None, list[tuple[int, ErrorCode]]] = {}

    def add(name, partition: int, result) -> None:
        answer.setdefault(name, []).append((partition, _code(result)))

    def response():
        return build(m.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=tuple(
            build(m.OffsetCommitResponseTopic, name=name, topic_id=topic_ids.get(name), partitions=tuple(
                m.OffsetCommitResponsePartition(partition_index=p, error_code=code) for p, code in parts))
            for name, parts in answer.items()))

    if not _authz.group(ctx, _authz.Op.READ, request.group_id):
        for t, name in zip(request.topics, names):
            for p in t.partitions:
                add(name, p.partition_index, _authz.GROUP_DENIED)
        return response()
    readable = _authz.filter_topics(ctx, _authz.Op.READ, [n for n in names if n is not None])
    valid: list[tuple[str, object]] = []  # (topic, request partition) the group coordinator sees
    for t, name in zip(request.topics, names):
        for p in t.partitions:
            if name is None:
                add(name, p.partition_index, errors.UnknownTopicId(f"OffsetCommit: no topic has the id {t.topic_id}"))
            elif name not in readable:
                add(name, p.partition_index, _authz.TOPIC_DENIED)
            elif not broker.partition_exists(name, p.partition_index):
                add(name, p.partition_index,
                    errors.UnknownTopicOrPartition(f"OffsetCommit: no partition {name}-{p.partition_index}"))
            else:
                valid.append((name, p))
    if not valid:  # Kafka answers without asking the group coordinator (no simple group is made)
        return response()
    # NOT_COORDINATOR for a group another node of a cluster coordinates: the group is not asked.
    group_error: KafkaError | None = broker.coordinator_error(0, request.group_id)
    check = None  # a consumer group's per-partition check (KIP-1251), if any
    if group_error is None:
        try:
            check = broker.groups.validate_offset_commit(request.group_id, generation, request.member_id,
                                                         getattr(request, "group_instance_id", None),
                                                         api_version=ctx.api_version)
        except KafkaError as exc:
            group_error = exc
    if check is not None and group_error is None:
        # A partition the member may not commit at this epoch refuses the whole commit, as Kafka
        # 4.4's validator throws for the request (measured: nothing of it is stored).
        group_error = next((e for e in (check(name, p.partition_index) for name, p in valid) if e is not None), None)
    now = broker.clock()
    # Per partition None (stored) or the domain error; mapped to codes in the response.
    results: dict[tuple[str, int], KafkaError | None] = {}
    to_store: dict[tuple[str, int], OffsetValue] = {}
    for name, p in valid:
        tp = (name, p.partition_index)
        if group_error is not None:
            results[tp] = group_error
        elif p.committed_metadata is not None and len(p.committed_metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
            results[tp] = errors.OffsetMetadataTooLarge(
                f"OffsetCommit: the metadata of {name}-{p.partition_index} is "
                f"{len(p.committed_metadata.encode())} bytes, above offset.metadata.max.bytes="
                f"{OFFSET_METADATA_MAX_BYTES}")
        else:
            results[tp] = None
            to_store[tp] = OffsetValue(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                       p.committed_metadata or "", now)

    def coordinator_answered():
        for (name, partition), result in results.items():
            add(name, partition, result)
        return response()

    if not to_store:
        return coordinator_answered()

    def stored(err: KafkaError | None):
        if err is not None:
            for tp in to_store:
                results[tp] = err
        return coordinator_answered()

    fut, respond = reply_later(stored)
    broker.groups.commit_offsets(request.group_id, to_store, respond)
    return fut


def _name(broker, request_topic) -> str | None:
    """The name of a v10+ request topic (named by id), or None for an unknown id."""
    topic = broker.metadata.topics.by_id.get(request_topic.topic_id)
    return topic.name if topic is not None else None


def _code(result) -> ErrorCode:
    """A partition's result as a wire code: an ACL refusal is one already."""
    return result if isinstance(result, ErrorCode) else error_code(result)
