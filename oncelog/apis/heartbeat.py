"""Heartbeat (key 12), v0-4.

ACLs (Kafka's KafkaApis.handleHeartbeatRequest): READ on the group, else
GROUP_AUTHORIZATION_FAILED. In a cluster of nodes (:mod:`oncelog.cluster`), a group another node
coordinates is then NOT_COORDINATOR, and the group is not asked.

Version notes:

Heartbeat: v0-4

- v0: the oldest served.
- v1: the throttle time in the answer.
- v2: the schema of v1; the throttle is applied after the answer (KIP-219).
- v3: ``group_instance_id`` (static membership, KIP-345).
- v4: flexible versions (compact strings and arrays, tagged fields).
"""

from __future__ import annotations

from ..errors import KafkaError
from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module
from ._groups import error_code

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    if not _authz.group(ctx, _authz.Op.READ, request.group_id):
        return build(m.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=_authz.GROUP_DENIED)
    not_coordinator = ctx.broker.coordinator_error(0, request.group_id)
    if not_coordinator is not None:
        return build(m.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error_code(not_coordinator))
    try:
        ctx.broker.groups.heartbeat(request.group_id, request.generation_id, request.member_id,
                                    getattr(request, "group_instance_id", None))
        code = OK
    except KafkaError as exc:
        code = error_code(exc)
    return build(m.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=code)
