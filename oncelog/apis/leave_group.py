"""LeaveGroup (key 13), v0-5; v3+ removes several members (incl. static ones by instance id).

ACLs (Kafka's KafkaApis.handleLeaveGroupRequest): READ on the group, else
GROUP_AUTHORIZATION_FAILED and no member leaves. In a cluster of nodes (:mod:`oncelog.cluster`), a
group another node coordinates is then NOT_COORDINATOR for the whole request (no member
results), and no member leaves.

Version notes:

LeaveGroup: v0-5

- v0: the oldest served: one member.
- v1: the throttle time in the answer.
- v2: the schema of v1; the throttle is applied after the answer (KIP-219).
- v3: several members at once, static ones by ``group_instance_id`` (KIP-345).
- v4: flexible versions (compact strings and arrays, tagged fields).
- v5: a per-member ``reason`` (KIP-800).
"""

from __future__ import annotations

from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module
from ._groups import error_code

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    if not _authz.group(ctx, _authz.Op.READ, request.group_id):
        return build(m.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=_authz.GROUP_DENIED, members=())
    not_coordinator = ctx.broker.coordinator_error(0, request.group_id)
    if not_coordinator is not None:
        return build(m.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=error_code(not_coordinator),
                     members=())
    if ctx.api_version >= 3:
        members = [(x.member_id, x.group_instance_id) for x in request.members]
    else:
        members = [(request.member_id, None)]
    codes = [error_code(e) for e in ctx.broker.groups.leave(request.group_id, members)]
    if ctx.api_version < 3:
        return build(m.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=codes[0])
    results = tuple(m.MemberResponse(member_id=mid, group_instance_id=iid, error_code=code)
                    for (mid, iid), code in zip(members, codes))
    return build(m.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=OK, members=results)
