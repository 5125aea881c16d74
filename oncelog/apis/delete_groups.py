"""DeleteGroups (key 42), v0-2: only Empty groups (NON_EMPTY_GROUP otherwise); their offsets
and metadata get tombstones in ``__consumer_offsets``.

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


from . import _authz
from ._base import NO_THROTTLE, build, response_module, reply_later
from ._groups import error_code

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


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

    if not local:
        return response({})
    fut, respond = reply_later(response)
    ctx.broker.groups.delete_groups(local, respond)
    return fut
