"""DeleteGroups (key 42), v0-2: only Empty groups (NON_EMPTY_GROUP otherwise); their offsets
and metadata get tombstones in ``__consumer_offsets``."""

from __future__ import annotations


from ._base import NO_THROTTLE, build, response_module, reply_later
from ._groups import error_code

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    names = list(request.groups_names)
    fut, respond = reply_later(lambda results: build(m.DeleteGroupsResponse, throttle_time=NO_THROTTLE, results=tuple(
        m.DeletableGroupResult(group_id=g, error_code=error_code(results[g])) for g in names)))

    ctx.broker.groups.delete_groups(names, respond)
    return fut
