"""JoinGroup (key 11), v0-9 (Kafka 4.4 still serves v0-1; they carry no rebalance timeout, so the
session timeout stands for it, as in Kafka). The answer waits until the rebalance completes (see
:class:`oncelog.groups.coordinator.GroupCoordinator`). v4+ requires a known member id: a first
join gets MEMBER_ID_REQUIRED with the id to use (KIP-394).

ACLs (Kafka's KafkaApis.handleJoinGroupRequest): READ on the group, else
GROUP_AUTHORIZATION_FAILED and the group is not touched. In a cluster of nodes
(:mod:`oncelog.cluster`), a group another node coordinates is NOT_COORDINATOR (after the ACL
check), and nothing of it is made here.

Version notes:

JoinGroup: v0-9

- v0: the oldest served: no rebalance timeout (the session timeout stands for it).
- v1: ``rebalance_timeout_ms``.
- v2: the throttle time in the answer.
- v3: the schema of v2; the throttle is applied after the answer (KIP-219).
- v4: a first join gets MEMBER_ID_REQUIRED and joins again with that id (KIP-394).
- v5: ``group_instance_id`` (static membership, KIP-345).
- v6: flexible versions (compact strings and arrays, tagged fields).
- v7: ``protocol_type`` in the answer (KIP-559).
- v8: ``reason`` in the request (KIP-800).
- v9: ``skip_assignment`` in the answer (KIP-814).
"""

from __future__ import annotations


from ..groups.state import JoinResult
from . import _authz
from ._base import NO_THROTTLE, build, response_module, reply_later
from ._groups import error_code

API_KEY = 11
MIN_VERSION = 0
MAX_VERSION = 9


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    def response(result):
        members = tuple(build(m.JoinGroupResponseMember, member_id=mid, group_instance_id=iid, metadata=meta)
                        for mid, iid, meta in result.members)
        return build(m.JoinGroupResponse, throttle_time=NO_THROTTLE, error_code=error_code(result.error),
                     generation_id=result.generation, protocol_type=result.protocol_type,
                     protocol_name=result.protocol_name if ctx.api_version >= 7 else (result.protocol_name or ""),
                     leader=result.leader, skip_assignment=result.skip_assignment, member_id=result.member_id,
                     members=members)

    if not _authz.group(ctx, _authz.Op.READ, request.group_id):
        return build(m.JoinGroupResponse, throttle_time=NO_THROTTLE, error_code=_authz.GROUP_DENIED,
                     generation_id=-1, protocol_type=None, protocol_name=None if ctx.api_version >= 7 else "",
                     leader="", skip_assignment=False, member_id=request.member_id, members=())
    not_coordinator = ctx.broker.coordinator_error(0, request.group_id)
    if not_coordinator is not None:  # as the coordinator answers any error of the request
        return response(JoinResult(not_coordinator, member_id=request.member_id))
    fut, respond = reply_later(response)

    rebalance_timeout = getattr(request, "rebalance_timeout", None)
    ctx.broker.groups.join(
        group_id=request.group_id, member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None), client_id=ctx.client_id or "",
        client_host="/" + ctx.peer.rsplit(":", 1)[0],
        session_timeout_ms=int(request.session_timeout.total_seconds() * 1000),
        rebalance_timeout_ms=int(rebalance_timeout.total_seconds() * 1000) if rebalance_timeout else -1,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        require_known_member_id=ctx.api_version >= 4, skip_assignment=ctx.api_version >= 9, respond=respond,
        describable=_authz.describable_topics(ctx))
    return fut
