"""What ShareFetch and ShareAcknowledge share (KIP-932): the session step, the acknowledgements
of a request applied partition by partition before anything is fetched (all or none per
partition; each answered once its state is durable), the release of a session that ends, and
the partition answers' common parts. The share coordinator is
:class:`oncelog.groups.share_coordinator.ShareCoordinator`."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from .. import errors
from ..groups.share_sessions import ShareSessionError
from . import _authz
from ._base import LEADER_EPOCH

NO_LEADER = (-1, -1)


def connection_of(ctx):
    """The token a share session is bound to: the identity of the connection's security session
    (one object per connection, alive as long as it; the broker ends the connection's share
    sessions when it closes, before the id could be another's), or the peer address of an
    in-process caller."""
    return id(ctx.session) if ctx.session is not None else ctx.peer


def topic_name(ctx, topic_id):
    topic = ctx.broker.metadata.topics.by_id.get(topic_id)
    return topic.name if topic is not None else None


def partition_error(ctx, name, topic_id, index, readable) -> errors.KafkaError | None:
    """Why a partition of a share request cannot be served here, or None."""
    if name is None:
        return errors.UnknownTopicId(f"no topic with id {topic_id}")
    if name not in readable:
        return _Denied()
    try:
        ctx.broker.partitions.get(name, index)
    except errors.KafkaError as exc:
        return exc
    return None


class _Denied(errors.KafkaError):
    """TOPIC_AUTHORIZATION_FAILED for one partition."""


def code_of(error) -> ErrorCode:
    if error is None:
        return ErrorCode.none
    if isinstance(error, _Denied):
        return _authz.TOPIC_DENIED
    return errors.error_code_for(error)


def message_of(error) -> str | None:
    return None if error is None or isinstance(error, _Denied) else str(error)


UNSET_LEADER = (0, 0)  # Kafka's LeaderIdAndEpoch left unset: the schema's defaults


def leader_of(ctx, error) -> tuple[int, int]:
    """A served partition's current leader (this node, its one epoch); after NOT_LEADER_OR_FOLLOWER
    unknown (-1, -1); after another error unset, as Kafka 4.4 leaves it ((0, 0), the schema's
    defaults: clients read it only with NOT_LEADER_OR_FOLLOWER)."""
    if error is None:
        return (ctx.broker.node_id, LEADER_EPOCH)
    return NO_LEADER if code_of(error) in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch) \
        else UNSET_LEADER


async def apply_acks(ctx, group_id, member_id, topics, readable) -> dict:
    """Every partition's acknowledgements of the request, applied (:meth:`ShareCoordinator.acknowledge`)
    and made durable: {(topic id, partition): error or None}."""
    share = ctx.broker.share
    loop = asyncio.get_running_loop()
    waits = {}
    for t in topics:
        name = topic_name(ctx, t.topic_id)
        for p in t.partitions:
            batches = p.acknowledgement_batches
            if not batches:
                continue
            key = (t.topic_id, p.partition_index)
            error = partition_error(ctx, name, t.topic_id, p.partition_index, readable)
            fut = loop.create_future()
            waits[key] = fut
            if error is not None:
                fut.set_result(error)
                continue
            acks = [(b.first_offset, b.last_offset, tuple(b.acknowledge_types)) for b in batches]
            share.acknowledge(group_id, member_id, name, t.topic_id, p.partition_index, acks,
                              lambda err, fut=fut: fut.done() or fut.set_result(err))
    return {key: await fut for key, fut in waits.items()}


def refused(ctx, request) -> tuple[ErrorCode, str | None] | None:
    """Why ShareFetch or ShareAcknowledge is refused as a whole before its session step, as
    Kafka checks both: READ on the group (GROUP_AUTHORIZATION_FAILED), a member id."""
    if not _authz.group(ctx, _authz.Op.READ, request.group_id or ""):
        return _authz.GROUP_DENIED, None
    if not request.member_id:
        return ErrorCode.invalid_request, "MemberId can't be empty."
    return None


def session_error(exc: ShareSessionError):
    return exc.code, exc.message


def release_session(ctx, group_id, member_id) -> None:
    parts = ctx.broker.share.sessions.release(group_id, member_id)
    if parts:
        ctx.broker.share.release(group_id, member_id, parts)
