"""AlterShareGroupOffsets (key 91), v0-0: set the share-partition start offset of named partitions
of an empty share group (KIP-932; :meth:`~oncelog.groups.share_coordinator.ShareCoordinator.alter_start`):
each gets a new state at that offset with nothing in flight, durable before the answer, and the
group's next fetch of the partition begins there.

As Kafka's KafkaApis.handleAlterShareGroupOffsetsRequest and GroupCoordinatorShard.alterShareGroupOffsets:
READ on the group, else a top-level GROUP_AUTHORIZATION_FAILED; per topic READ, else each of its
partitions TOPIC_AUTHORIZATION_FAILED, and a topic that does not exist UNKNOWN_TOPIC_OR_PARTITION
(these first, in the request's order); then the group: of another type GROUP_ID_NOT_FOUND, with
members NON_EMPTY_GROUP ("The group is not empty."); a group id nobody joined is altered as Kafka 4.4
does (its state made) — a top-level error
answers no topics at all; a partition the topic lacks is UNKNOWN_TOPIC_OR_PARTITION, the others
NONE once their state is durable. In a cluster of nodes a group another node coordinates is
NOT_COORDINATOR; the state of a partition another node leads is kept there (docs/share-groups.md)
and written with InitializeShareGroupState (:mod:`.initialize_share_group_state`) over the nodes'
control link, as Kafka's persister does; a node that does not answer makes its partitions
COORDINATOR_NOT_AVAILABLE.

Version notes:

AlterShareGroupOffsets: v0-0

- v0: the only version (Kafka 4.1, KIP-932).
"""

from __future__ import annotations

import asyncio
import uuid

from kio.schema.errors import ErrorCode

from .. import errors
from . import _authz, _share_state
from ._base import NO_THROTTLE, build, reply_later, response_module
from ._groups import error_code, error_message

API_KEY = 91
MIN_VERSION = 0
MAX_VERSION = 0

ZERO_ID = uuid.UUID(int=0)
UNKNOWN_TOPIC = "This server does not host this topic-partition."


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    broker = ctx.broker
    group_id = request.group_id

    def top_level(code, message):
        return build(m.AlterShareGroupOffsetsResponse, throttle_time=NO_THROTTLE, error_code=code,
                     error_message=message, responses=())

    if not _authz.group(ctx, _authz.Op.READ, group_id):
        return top_level(_authz.GROUP_DENIED, "Group authorization failed.")
    if not group_id:
        return top_level(ErrorCode.invalid_group_id, "The configured groupId is invalid.")
    not_coordinator = broker.coordinator_error(0, group_id)
    if not_coordinator is not None:
        return top_level(error_code(not_coordinator), error_message(not_coordinator))
    group = broker.share.groups.get(group_id)
    if group is None and group_id in broker.groups.groups:
        return top_level(ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
    if group is not None and group.members:
        return top_level(ErrorCode.non_empty_group, "The group is not empty.")

    topics = broker.metadata.topics
    allowed = _authz.filter_topics(ctx, _authz.Op.READ, [t.topic_name for t in request.topics])
    answers: dict[str, tuple] = {}  # topic name -> (topic id, [(partition, code, message)]), in order
    starts: dict = {}
    elsewhere: dict = {}  # node -> [(topic, partition, start offset)]
    # As Kafka's response builder: the topics refused before the group is asked first, then the others.
    refused = [t for t in request.topics if t.topic_name not in allowed or topics.get(t.topic_name) is None]
    for t in refused + [t for t in request.topics if t not in refused]:
        topic = topics.get(t.topic_name)
        tid, rows = answers.setdefault(t.topic_name, (topic.topic_id if topic is not None else ZERO_ID, []))
        if t in refused:
            code, message = ((_authz.TOPIC_DENIED, "Topic authorization failed.") if t.topic_name not in allowed
                             else (ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC))
            rows.extend((p.partition_index, code, message) for p in t.partitions)
            continue
        for p in t.partitions:
            if not 0 <= p.partition_index < topic.partitions:
                rows.append((p.partition_index, ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC))
            else:
                if broker.placement.leads(topic.name, p.partition_index):
                    starts[(topic.topic_id, p.partition_index)] = p.start_offset
                else:  # its leader keeps the state: InitializeShareGroupState there
                    node = broker.placement.leader(topic.name, p.partition_index)
                    elsewhere.setdefault(node, []).append((topic, p.partition_index, p.start_offset))
                rows.append((p.partition_index, None, (topic.topic_id, p.partition_index)))

    def response(results):
        def row(index, code, message):
            if code is None:  # altered here: its state's write decides
                error = results.get(message)
                return m.AlterShareGroupOffsetsResponsePartition(
                    partition_index=index, error_code=ErrorCode.none if error is None else errors.error_code_for(error),
                    error_message=None if error is None else str(error))
            return m.AlterShareGroupOffsetsResponsePartition(partition_index=index, error_code=code,
                                                             error_message=message)
        return build(m.AlterShareGroupOffsetsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                     error_message=None, responses=tuple(
                         m.AlterShareGroupOffsetsResponseTopic(topic_name=name, topic_id=tid, partitions=tuple(
                             row(*r) for r in rows)) for name, (tid, rows) in answers.items()))

    if not starts and not elsewhere:
        return response({})
    fut, respond = reply_later(response)
    if not elsewhere:
        broker.share.alter_start(group_id, starts, respond)
        return fut

    async def alter_everywhere() -> None:
        here = asyncio.get_running_loop().create_future()
        broker.share.alter_start(group_id, starts, lambda results: here.done() or here.set_result(results))
        there = await _share_state.initialize(ctx, group_id, elsewhere)
        respond({**there, **await here})
    asyncio.ensure_future(alter_everywhere())
    return fut
