"""DescribeGroups (key 15), v0-6. An unknown group is described as Dead with no members, as
Kafka does; a group not Stable is described without protocol and member metadata (Kafka's
ClassicGroupMember.describeNoMetadata: no protocol is chosen for good until the group is Stable);
from v6 (KIP-1043) also with GROUP_ID_NOT_FOUND and Kafka's message, and then
without authorized operations (Kafka adds them only to groups described without error).
A consumer (KIP-848) group is described as a group that does not exist, as Kafka does
(ConsumerGroupDescribe describes it; a streams group likewise, StreamsGroupDescribe's), with "Group X is not a classic group." from v6.

ACLs (Kafka's KafkaApis.handleDescribeGroupsRequest): DESCRIBE on each group, else that group is
answered GROUP_AUTHORIZATION_FAILED with nothing of it; authorized operations are the
principal's on the group. In a cluster of nodes (:mod:`oncelog.cluster`), a group another node
coordinates is then answered NOT_COORDINATOR with nothing of it (the other groups of the request
are described as usual).

Version notes:

DescribeGroups: v0-6

- v0: the oldest served.
- v1: the throttle time in the answer.
- v2: the schema of v1; the throttle is applied after the answer (KIP-219).
- v3: ``include_authorized_operations`` (KIP-430).
- v4: members' ``group_instance_id`` in the answer (KIP-345).
- v5: flexible versions (compact strings and arrays, tagged fields).
- v6: a per-group ``error_message``; an unknown group is GROUP_ID_NOT_FOUND (KIP-1043).
"""

from __future__ import annotations

from .. import errors
from ..groups.consumer_state import ConsumerGroup
from ..groups.streams_group import StreamsGroup
from ..groups.state import GroupState
from . import _authz
from ._acl import AUTHORIZED_OPERATIONS_OMITTED, authorized
from ._base import NO_THROTTLE, OK, build, response_module
from ._groups import error_code

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 6


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    want_ops = getattr(request, "include_authorized_operations", False)
    out = []
    for gid in request.groups:
        if not _authz.group(ctx, _authz.Op.DESCRIBE, gid):
            out.append(build(m.DescribedGroup, error_code=_authz.GROUP_DENIED, error_message=None, group_id=gid,
                             group_state="", protocol_type="", protocol_data="", members=(),
                             authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            continue
        not_coordinator = ctx.broker.coordinator_error(0, gid)
        if not_coordinator is not None:
            out.append(build(m.DescribedGroup, error_code=error_code(not_coordinator), error_message=None,
                             group_id=gid, group_state="", protocol_type="", protocol_data="", members=(),
                             authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            continue
        ops = authorized(ctx, _authz.R.GROUP, gid, want_ops)
        group = ctx.broker.groups.describe(gid)
        if group is None or isinstance(group, (ConsumerGroup, StreamsGroup)):
            if ctx.api_version >= 6:
                missing = errors.GroupIdNotFound(f"Group {gid} not found." if group is None
                                                 else f"Group {gid} is not a classic group.")
                out.append(build(m.DescribedGroup, error_code=error_code(missing),
                                 error_message=str(missing), group_id=gid, group_state="Dead",
                                 protocol_type="", protocol_data="", members=(),
                                 authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            else:
                out.append(build(m.DescribedGroup, error_code=OK, group_id=gid, group_state="Dead", protocol_type="",
                                 protocol_data="", members=(), authorized_operations=ops))
            continue
        stable = group.state is GroupState.STABLE
        members = tuple(
            build(m.DescribedGroupMember, member_id=mem.member_id, group_instance_id=mem.group_instance_id,
                  client_id=mem.client_id, client_host=mem.client_host,
                  member_metadata=mem.metadata_for(group.protocol_name or "") if stable else b"",
                  member_assignment=mem.assignment)
            for mem in group.members.values()
        )
        out.append(build(m.DescribedGroup, error_code=OK, error_message=None, group_id=gid, group_state=group.state.value,
                         protocol_type=group.protocol_type or "",
                         protocol_data=(group.protocol_name or "") if stable else "",
                         members=members, authorized_operations=ops))
    return build(m.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=tuple(out))
