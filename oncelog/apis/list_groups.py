"""ListGroups (key 16), v0-5, with the state filter (v4+) and type filter (v5+: "classic", "consumer": KIP-848 groups; their states are
Kafka's ConsumerGroupState names: Empty, Assigning, Reconciling, Stable; "share": KIP-932 share
groups, Empty or Stable, protocol type "share", listed by the node coordinating them; "streams": KIP-1071
groups, protocol type "streams", states Empty, NotReady, Assigning, Reconciling, Stable).

ACLs (Kafka's KafkaApis.handleListGroupsRequest): with DESCRIBE on the cluster every group,
else only the groups the principal may DESCRIBE, the others left out silently.

Version notes:

ListGroups: v0-5

- v0: the oldest served.
- v1: the throttle time in the answer.
- v2: the schema of v1; the throttle is applied after the answer (KIP-219).
- v3: flexible versions (compact strings and arrays, tagged fields).
- v4: ``states_filter``; each group's state in the answer (KIP-518).
- v5: ``types_filter``; each group's type in the answer (KIP-848).
"""

from __future__ import annotations

from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    states = {s.lower() for s in (getattr(request, "states_filter", None) or ())}
    types = {t.lower() for t in (getattr(request, "types_filter", None) or ())}
    groups = []
    everything = _authz.cluster(ctx, _authz.Op.DESCRIBE)
    for g in ctx.broker.groups.list_groups():
        if not everything and not _authz.group(ctx, _authz.Op.DESCRIBE, g.group_id):
            continue
        if states and g.state.value.lower() not in states:
            continue
        if types and g.group_type not in types:
            continue
        groups.append(build(m.ListedGroup, group_id=g.group_id, protocol_type=g.protocol_type or "",
                            group_state=g.state.value, group_type=g.group_type))
    share = ctx.broker.share
    for group_id in sorted(share.group_ids()):
        if ctx.broker.coordinator_error(0, group_id) is not None:
            continue  # another node of a cluster lists it (it coordinates the group)
        if not everything and not _authz.group(ctx, _authz.Op.DESCRIBE, group_id):
            continue
        group = share.groups.get(group_id)
        state = group.state.value if group is not None else "Empty"
        if states and state.lower() not in states or types and "share" not in types:
            continue
        groups.append(build(m.ListedGroup, group_id=group_id, protocol_type="share", group_state=state,
                            group_type="share"))
    return build(m.ListGroupsResponse, throttle_time=NO_THROTTLE, error_code=OK, groups=tuple(groups))
