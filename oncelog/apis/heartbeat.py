"""Heartbeat (key 12), v0-4."""

from __future__ import annotations

from ._base import NO_THROTTLE, build, response_module

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    code = ctx.broker.groups.heartbeat(request.group_id, request.generation_id, request.member_id,
                                       getattr(request, "group_instance_id", None))
    return build(m.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=code)
