"""ShareFetch (key 78), v1-2: a share group member's fetch (KIP-932): its share session's step,
then the acknowledgements it carries (applied and made durable first, per partition all or
none: ``acknowledge_error_code``), then records acquired for it from the session's partitions —
whole log batches and the acquired ranges with their delivery counts — up to ``max_records``
over the whole request (soft: whole log batches; exact with v2's record-limit acquire mode) and
``max_bytes``, partitions taken in turn from one request to the next. When nothing can be
acquired the request waits up to ``max_wait`` for records (new data, or records released or
timed out). The session's rules (:mod:`oncelog.groups.share_sessions`): epoch 0 opens one (no
acknowledgements then: INVALID_REQUEST), -1 closes it after its acknowledgements (its member's
acquired records become available again), any other must be the session's next
(INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_NOT_FOUND).

ACLs (Kafka's KafkaApis.handleShareFetchRequest): READ on the group, else
GROUP_AUTHORIZATION_FAILED for the whole request; READ on each topic, else its partitions are
TOPIC_AUTHORIZATION_FAILED. A partition this node does not lead is NOT_LEADER_OR_FOLLOWER.

Version notes:

ShareFetch: v1-2

- v1: the stable version (Kafka 4.1); v0 was Kafka 4.0's early access, removed.
- v2: ``share_acquire_mode`` (0 batch-optimized, 1 record-limit) and ``is_renew_ack`` (KIP-1206,
  KIP-1222): a renew-only request fetches nothing.
"""

from __future__ import annotations

import datetime
import time

from kio.schema.errors import ErrorCode

from .. import errors
from ..groups.share_sessions import ShareSessionError
from . import _authz, _share
from ._base import NO_THROTTLE, build, response_module
from .fetch import wait_for_data

API_KEY = 78
MIN_VERSION = 1
MAX_VERSION = 2

RECORD_LIMIT = 1


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    group_id, member_id = request.group_id or "", request.member_id or ""

    def refuse(code, message=None):
        return build(m.ShareFetchResponse, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
                     acquisition_lock_timeout=datetime.timedelta(0), responses=(), node_endpoints=())

    if (why := _share.refused(ctx, request)) is not None:
        return refuse(*why)
    has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    # Only partitions that exist join the session: a session must not grow with made-up ids
    # (an unknown one is answered UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION, and forgotten).
    by_id = ctx.broker.metadata.topics.by_id
    added = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions
             if (topic := by_id.get(t.topic_id)) is not None and 0 <= p.partition_index < topic.partitions]
    forgotten = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    try:
        context = ctx.broker.share.sessions.fetch(group_id, member_id, request.share_session_epoch,
                                                  _share.connection_of(ctx), added, forgotten, has_acks)
    except ShareSessionError as exc:
        return refuse(*_share.session_error(exc))
    return _serve(ctx, m, request, context)


async def _serve(ctx, m, request, context):
    group_id, member_id = context.group_id, context.member_id
    share = ctx.broker.share
    settings = share.settings(group_id)
    names = {tid: _share.topic_name(ctx, tid)
             for tid in {tid for tid, _index in context.partitions} | {t.topic_id for t in request.topics}}
    readable = _authz.filter_topics(ctx, _authz.Op.READ, [n for n in names.values() if n is not None])
    acks = await _share.apply_acks(ctx, group_id, member_id, request.topics, readable)
    answers: dict = {}  # (topic id, partition) -> [error, records, acquired]
    for t in request.topics:  # named but not in the session: a topic id or partition that does not exist
        for p in t.partitions:
            key = (t.topic_id, p.partition_index)
            if key not in context.partitions and not context.final:
                answers[key] = [_share.partition_error(ctx, names.get(t.topic_id), t.topic_id, p.partition_index,
                                                       readable), None, []]
    if context.final:
        _share.release_session(ctx, group_id, member_id)
    elif not getattr(request, "is_renew_ack", False):
        deadline = time.monotonic() + request.max_wait.total_seconds()
        _fetch(ctx, request, context, names, readable, answers)
        remaining = deadline - time.monotonic()
        if not any(a[2] for a in answers.values()) and remaining > 0 and context.partitions:
            # Nothing to acquire: wait once for new data or records given back, then look again.
            logs = []
            for topic_id, index in context.partitions:
                try:
                    logs.append(ctx.broker.partitions.get(names.get(topic_id), index).log)
                except errors.KafkaError:  # an error partition has nothing to wait for
                    pass
            waiter = share.waiter()
            try:
                await wait_for_data(logs, waiter, remaining)
            finally:
                share.forget(waiter)
            _fetch(ctx, request, context, names, readable, answers)
    keys = dict.fromkeys(list(acks) + list(answers) +
                         ([(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
                          if context.initial else []))
    by_topic: dict = {}
    for topic_id, index in keys:
        error, records, acquired = answers.get((topic_id, index), (None, None, []))
        ack_error = acks.get((topic_id, index))
        leader_id, leader_epoch = _share.leader_of(ctx, error)
        by_topic.setdefault(topic_id, []).append(build(
            m.PartitionData, partition_index=index, error_code=_share.code_of(error),
            error_message=_share.message_of(error), acknowledge_error_code=_share.code_of(ack_error),
            acknowledge_error_message=_share.message_of(ack_error),
            current_leader=m.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch),
            records=records or b"", acquired_records=tuple(  # kio: records are not nullable here
                m.AcquiredRecords(first_offset=a.first_offset, last_offset=a.last_offset,
                                  delivery_count=a.delivery_count) for a in acquired)))
    return build(m.ShareFetchResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
                 acquisition_lock_timeout=datetime.timedelta(milliseconds=int(settings["share.record.lock.duration.ms"])),
                 responses=tuple(m.ShareFetchableTopicResponse(topic_id=tid, partitions=tuple(parts))
                                 for tid, parts in by_topic.items()),
                 node_endpoints=())


def _fetch(ctx, request, context, names, readable, answers) -> None:
    """One pass over the session's partitions, in turn from the session's epoch, within the
    request's record and byte budgets; adds to ``answers``."""
    share = ctx.broker.share
    parts = sorted(context.partitions, key=lambda tp: (str(tp[0]), tp[1]))
    if parts:
        turn = context.epoch % len(parts)
        parts = parts[turn:] + parts[:turn]
    records_left = request.max_records - sum(
        a.last_offset - a.first_offset + 1 for v in answers.values() for a in v[2])
    bytes_left = request.max_bytes - sum(len(v[1] or b"") for v in answers.values())
    record_limit = getattr(request, "share_acquire_mode", 0) == RECORD_LIMIT
    for topic_id, index in parts:
        if answers.get((topic_id, index), (None, None, []))[2]:
            continue
        name = names.get(topic_id)
        error = _share.partition_error(ctx, name, topic_id, index, readable)
        if error is not None:
            answers[(topic_id, index)] = [error, None, []]
            continue
        if records_left <= 0 or bytes_left <= 0:
            continue
        got = share.fetch(context.group_id, context.member_id, name, topic_id, index,
                          max_records=records_left, batch_size=request.batch_size, max_bytes=bytes_left,
                          record_limit=record_limit)
        if got.error is not None or got.acquired:
            answers[(topic_id, index)] = [got.error, got.records, got.acquired]
            records_left -= sum(a.last_offset - a.first_offset + 1 for a in got.acquired)
            bytes_left -= len(got.records or b"")
