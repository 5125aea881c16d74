"""DeleteShareGroupOffsets (key 92), v0-0: forget an empty share group's state of named topics
(KIP-932; :meth:`~oncelog.groups.share_coordinator.ShareCoordinator.delete_state`): every share
partition of the topic gets a tombstone in ``__share_group_state``, durable before the answer, and
the group's next fetch of it starts afresh at ``share.auto.offset.reset``.

As Kafka's KafkaApis.handleDeleteShareGroupOffsetsRequest and GroupCoordinatorShard.initiateDeleteShareGroupOffsets:
DELETE on the group, else a top-level GROUP_AUTHORIZATION_FAILED; per topic READ, else
TOPIC_AUTHORIZATION_FAILED (these topics first); then the group: unknown, or of another type,
GROUP_ID_NOT_FOUND, with members NON_EMPTY_GROUP ("The group is not empty.") — a top-level error
answers no topics at all; a group without any share partition answers only the refused topics.
Then the topics deleted (with their ids), then those that could not be: a topic that does not
exist, or one the group has no share partitions of ("There is no offset information to delete."),
UNKNOWN_TOPIC_OR_PARTITION, topic id zero. In a cluster of nodes a group another node coordinates
is NOT_COORDINATOR; the state other nodes keep (of the partitions they lead) is found with
ReadShareGroupStateSummary (:mod:`.read_share_group_state_summary`) of every partition they lead
(the group's topics are those with state anywhere, as Kafka's coordinator knows them) and deleted
there with DeleteShareGroupState, as DeleteGroups does.

Version notes:

DeleteShareGroupOffsets: v0-0

- v0: the only version (Kafka 4.1, KIP-932).
"""

from __future__ import annotations

import asyncio
import uuid

from kio.schema.errors import ErrorCode

from .. import errors
from ..protocol.requests import request_module
from . import _authz, _share_state
from ._base import NO_THROTTLE, build, reply_later, response_module
from ._groups import error_code, error_message

API_KEY = 92
MIN_VERSION = 0
MAX_VERSION = 0

ZERO_ID = uuid.UUID(int=0)


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    broker = ctx.broker
    group_id = request.group_id

    def answer(code=ErrorCode.none, message=None, topics=()):
        return build(m.DeleteShareGroupOffsetsResponse, throttle_time=NO_THROTTLE, error_code=code,
                     error_message=message, responses=tuple(topics))

    def topic_row(name, tid, code=ErrorCode.none, message=None):
        return m.DeleteShareGroupOffsetsResponseTopic(topic_name=name, topic_id=tid, error_code=code,
                                                      error_message=message)

    if not _authz.group(ctx, _authz.Op.DELETE, group_id):
        return answer(_authz.GROUP_DENIED, "Group authorization failed.")
    names = [t.topic_name for t in request.topics]
    allowed = _authz.filter_topics(ctx, _authz.Op.READ, names)
    refused = [topic_row(n, ZERO_ID, _authz.TOPIC_DENIED, "Topic authorization failed.")
               for n in names if n not in allowed]
    if not group_id:
        return answer(ErrorCode.invalid_group_id, "The configured groupId is invalid.")
    not_coordinator = broker.coordinator_error(0, group_id)
    if not_coordinator is not None:
        return answer(error_code(not_coordinator), error_message(not_coordinator))
    if broker.cluster is None:
        return _delete(ctx, m, group_id, names, allowed, refused, answer, topic_row, {})
    fut, respond = reply_later(lambda found: found)

    async def discover() -> None:
        """Which topics the group has state of on the other nodes (ReadShareGroupStateSummary of
        every partition they lead), then as on one node."""
        summaries = await _share_state.read_summaries(ctx, group_id, _share_state.every_remote_partition(ctx))
        remote: dict = {}
        for (tid, index), found in summaries.items():
            if found is not None and not isinstance(found, errors.KafkaError):
                remote.setdefault(tid, set()).add(index)
        result = _delete(ctx, m, group_id, names, allowed, refused, answer, topic_row, remote)
        respond(await result if isinstance(result, asyncio.Future) else result)
    asyncio.ensure_future(discover())
    return fut


def _delete(ctx, m, group_id, names, allowed, refused, answer, topic_row, remote):
    """The group's checks and the deletion, ``remote`` the state other nodes keep ({topic id: partitions})."""
    broker = ctx.broker
    share = broker.share
    group = share.groups.get(group_id)
    if group is None and group_id not in share.group_ids() and not remote:
        kind = group_id in broker.groups.groups
        return answer(ErrorCode.group_id_not_found, f"Group {group_id} is not a share group." if kind
                      else f"Group {group_id} not found.")
    if group is not None and group.members:
        return answer(ErrorCode.non_empty_group, "The group is not empty.")
    held = share.state_partitions(group_id)
    for tid, parts in remote.items():
        held.setdefault(tid, set()).update(parts)
    if not held:
        return answer(topics=refused)
    topics = broker.metadata.topics
    deleting: dict = {}  # topic id -> name
    failed = []
    for name in dict.fromkeys(n for n in names if n in allowed):
        topic = topics.get(name)
        if topic is None:
            failed.append(topic_row(name, ZERO_ID, ErrorCode.unknown_topic_or_partition,
                                    "This server does not host this topic-partition."))
        elif topic.topic_id not in held:
            failed.append(topic_row(name, ZERO_ID, ErrorCode.unknown_topic_or_partition,
                                    "There is no offset information to delete."))
        else:
            deleting[topic.topic_id] = topic
    if not deleting:
        return answer(topics=refused + failed)

    def response(outcome: dict):
        done = [topic_row(t.name, tid) for tid, t in deleting.items() if outcome.get(tid) is None]
        bad = [topic_row(t.name, tid, errors.error_code_for(outcome[tid]), str(outcome[tid]))
               for tid, t in deleting.items() if outcome.get(tid) is not None]
        return answer(topics=refused + done + bad + failed)

    fut, respond = reply_later(response)
    asyncio.ensure_future(_delete_everywhere(ctx, group_id, deleting, respond))
    return fut


async def _delete_everywhere(ctx, group_id, deleting, respond) -> None:
    """Tombstones for the share partitions of ``deleting`` led here; on a cluster the other leaders
    delete theirs (DeleteShareGroupState, Kafka's persister call). {topic id: first error or None}."""
    broker = ctx.broker
    outcome: dict = {}
    here: set = set()
    elsewhere: dict = {}  # node -> {topic id: [partitions]}
    for tid, topic in deleting.items():
        for index in range(topic.partitions):
            if broker.placement.leads(topic.name, index):
                here.add((tid, index))
            else:
                node = broker.placement.leader(topic.name, index)
                elsewhere.setdefault(node, {}).setdefault(tid, []).append(index)
    loop = asyncio.get_running_loop()
    local = loop.create_future()
    broker.share.delete_state(group_id, here, lambda error: local.done() or local.set_result(error))
    error = await local
    if error is not None:
        for tid in {tid for tid, _ in here}:
            outcome[tid] = error
    m = request_module(86, 0)
    for node, parts in sorted(elsewhere.items()):
        try:
            reply = await broker.cluster.link(node).request(m.DeleteShareGroupStateRequest(
                group_id=group_id, topics=tuple(
                    m.DeleteStateData(topic_id=tid, partitions=tuple(m.PartitionData(partition=i) for i in ps))
                    for tid, ps in parts.items())))
        except Exception as exc:  # noqa: BLE001 - the node is down: its topics' state is not deleted
            for tid in parts:
                outcome.setdefault(tid, errors.CoordinatorNotAvailable(f"node {node} did not delete the state: {exc}"))
            continue
        for r in reply.results:
            bad = [p.error_code for p in r.partitions if p.error_code != 0]
            if bad:
                outcome.setdefault(r.topic_id, errors.CoordinatorNotAvailable(
                    f"node {node} did not delete the state: {bad[0]!r}"))
    respond(outcome)
