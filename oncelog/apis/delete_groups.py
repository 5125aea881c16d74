"""DeleteGroups (key 42), v0-2: only Empty groups (NON_EMPTY_GROUP otherwise); their offsets
and metadata get tombstones in ``__consumer_offsets``; a share group's share-partition state here
gets tombstones in ``__share_group_state`` (:meth:`~oncelog.groups.share_coordinator.ShareCoordinator.delete_group`).

ACLs (Kafka's KafkaApis.handleDeleteGroupsRequest): DELETE on each group, else that group is
GROUP_AUTHORIZATION_FAILED and left as it is. In a cluster of nodes (:mod:`oncelog.cluster`), a
group another node coordinates is then NOT_COORDINATOR and not asked (the other groups of the
request are deleted as usual).

Version notes:

DeleteGroups: v0-2

- v0: the oldest served.
- v1: the schema of v0; the throttle is applied after the answer (KIP-219).
- v2: flexible versions (compact strings and arrays, tagged fields).
"""

from __future__ import annotations

import asyncio

from .. import errors
from ..protocol.requests import request_module
from . import _authz
from ._base import NO_THROTTLE, build, response_module, reply_later
from ._groups import error_code

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


async def _delete_share_group_on_every_node(ctx, group_id, one_done) -> None:
    """A share group of a cluster: deleted here (membership, the state of the partitions this
    node leads), then the other leaders' state with DeleteShareGroupState (Kafka's persister
    call); the first error is the group's answer."""
    loop = asyncio.get_running_loop()
    here = loop.create_future()
    ctx.broker.share.delete_group(group_id, lambda error: here.done() or here.set_result(error))
    error = await here
    if error is None:
        placement = ctx.broker.placement
        by_node: dict = {}
        for t in ctx.broker.metadata.topics.values():
            if t.internal:
                continue
            for index in range(t.partitions):
                node = placement.leader(t.name, index)
                if node != ctx.broker.node_id:
                    by_node.setdefault(node, {}).setdefault(t.topic_id, []).append(index)
        m = request_module(86, 0)
        for node, topics in sorted(by_node.items()):
            try:
                answer = await ctx.broker.cluster.link(node).request(m.DeleteShareGroupStateRequest(
                    group_id=group_id, topics=tuple(
                        m.DeleteStateData(topic_id=tid, partitions=tuple(m.PartitionData(partition=i) for i in ps))
                        for tid, ps in topics.items())))
            except Exception as exc:  # noqa: BLE001 - the node is down: the group is not fully deleted
                error = errors.CoordinatorNotAvailable(f"node {node} did not delete the group's state: {exc}")
                break
            bad = [p.error_code for r in answer.results for p in r.partitions if p.error_code != 0]
            if bad:
                error = errors.CoordinatorNotAvailable(f"node {node} did not delete the group's state: {bad[0]!r}")
                break
    one_done({group_id: error})


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    names = list(request.groups_names)
    allowed = [g for g in dict.fromkeys(names) if _authz.group(ctx, _authz.Op.DELETE, g)]
    # Groups another node of a cluster coordinates: NOT_COORDINATOR, not asked.
    elsewhere = {g: e for g in allowed if (e := ctx.broker.coordinator_error(0, g)) is not None}
    local = [g for g in allowed if g not in elsewhere]

    def response(results):
        results = {**elsewhere, **results}
        return build(m.DeleteGroupsResponse, throttle_time=NO_THROTTLE, results=tuple(
            m.DeletableGroupResult(group_id=g, error_code=error_code(results[g]) if g in results
                                   else _authz.GROUP_DENIED) for g in names))

    share_ids = ctx.broker.share.group_ids()
    shares = [g for g in local if g in share_ids]
    local = [g for g in local if g not in share_ids]
    if not local and not shares:
        return response({})
    fut, respond = reply_later(response)
    results: dict = {}
    waiting = [len(shares) + (1 if local else 0)]

    def one_done(update: dict) -> None:
        results.update(update)
        waiting[0] -= 1
        if waiting[0] == 0:
            respond(results)
    for g in shares:
        if ctx.broker.cluster is None:
            ctx.broker.share.delete_group(g, lambda error, g=g: one_done({g: error}))
        else:
            asyncio.ensure_future(_delete_share_group_on_every_node(ctx, g, one_done))
    if local:
        ctx.broker.groups.delete_groups(local, one_done)
    return fut
