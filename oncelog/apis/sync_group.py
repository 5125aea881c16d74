"""SyncGroup (key 14), v0-5: the leader hands out assignments; followers wait for them.

ACLs (Kafka's KafkaApis.handleSyncGroupRequest): READ on the group, else
GROUP_AUTHORIZATION_FAILED and the group is not touched. From v5 protocol type and name are
mandatory: without either, INCONSISTENT_GROUP_PROTOCOL before the group is asked (Kafka's
SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent). In a cluster of nodes
(:mod:`oncelog.cluster`), a group another node coordinates is then NOT_COORDINATOR, and the
group is not asked.

Version notes:

SyncGroup: v0-5

- v0: the oldest served.
- v1: the throttle time in the answer.
- v2: the schema of v1; the throttle is applied after the answer (KIP-219).
- v3: ``group_instance_id`` (static membership, KIP-345).
- v4: flexible versions (compact strings and arrays, tagged fields).
- v5: ``protocol_type`` and ``protocol_name`` in the request, checked, and in the answer (KIP-559).
"""

from __future__ import annotations


from .. import errors
from . import _authz
from ._base import NO_THROTTLE, build, response_module, reply_later
from ._groups import error_code

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    fut, respond = reply_later(lambda result: build(
        m.SyncGroupResponse, throttle_time=NO_THROTTLE, error_code=_authz.GROUP_DENIED if isinstance(result, _Denied) else error_code(result.error), protocol_type=result.protocol_type,
        protocol_name=result.protocol_name, assignment=result.assignment))

    if not _authz.group(ctx, _authz.Op.READ, request.group_id):
        respond(_Denied())
        return fut
    if ctx.api_version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        respond(_Refused(errors.InconsistentGroupProtocol(
            "SyncGroup v5+ must name the protocol type and protocol name")))
        return fut
    not_coordinator = ctx.broker.coordinator_error(0, request.group_id)
    if not_coordinator is not None:
        respond(_Refused(not_coordinator))
        return fut
    ctx.broker.groups.sync(
        group_id=request.group_id, generation=request.generation_id, member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None), protocol_name=getattr(request, "protocol_name", None),
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments}, respond=respond)
    return fut


class _Refused:
    """The answer to a SyncGroup refused before the group is asked (a missing protocol, or a
    group another node coordinates)."""

    protocol_type = None
    protocol_name = None
    assignment = b""

    def __init__(self, error) -> None:
        self.error = error


class _Denied:
    """The answer to a SyncGroup refused by the ACLs."""

    error = None
    protocol_type = None
    protocol_name = None
    assignment = b""
