"""FindCoordinator (key 10), v0-6: this broker coordinates every group (key type 0) and
transactional id (key type 1); in a cluster of nodes (:mod:`oncelog.cluster`), the node leading the
key's ``__consumer_offsets`` / ``__transaction_state`` partition, as Kafka places it
(COORDINATOR_NOT_AVAILABLE while that node is not up). v4+ looks up several keys in one request (KIP-699). v5 only
allows TRANSACTION_ABORTABLE in answers (KIP-890), which this coordinator never needs to send.
v6 adds share group keys (type 2, KIP-932): share groups are not implemented (ShareGroupHeartbeat
is not advertised, so no client asks), so they get INVALID_REQUEST, as any unknown type.

ACLs (Kafka's KafkaApis.handleFindCoordinatorRequest): DESCRIBE on the group (key type 0), else
GROUP_AUTHORIZATION_FAILED; DESCRIBE on the transactional id (key type 1), else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; per key from v4.

Error messages are Kafka's: its Errors' own text for the code (the generic INVALID_REQUEST text
for an unknown key type, as Kafka 4.4 sends it); a found coordinator has "NONE" up to v3
(Kafka sets ``Errors.NONE.message()``) and "" from v4.

Version notes:

FindCoordinator: v0-6

- v0: the oldest served: groups only.
- v1: ``key_type`` (transactional ids); the throttle time and an error message in the answer.
- v2: the schema of v1; the throttle is applied after the answer (KIP-219).
- v3: flexible versions (compact strings and arrays, tagged fields).
- v4: several keys in one request, one answer per key (KIP-699).
- v5: TRANSACTION_ABORTABLE may be answered (KIP-890 part 1).
- v6: share group keys (key type 2, KIP-932).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

GROUP, TRANSACTION = 0, 1

# Kafka's Errors.<code>.message() for the codes this API answers.
_MESSAGES = {
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
    ErrorCode.invalid_request: "This most likely occurs because of a request being malformed by the client library or "
                               "the message was sent to an incompatible broker. See the broker logs for more details.",
    _authz.GROUP_DENIED: "Group authorization failed.",
    _authz.TXN_DENIED: "Transactional Id authorization failed.",
}


def _message(code, version: int) -> str:
    if code == OK:
        return "NONE" if version < 4 else ""
    return _MESSAGES.get(code, code.name.upper())


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    b = ctx.broker
    key_type = getattr(request, "key_type", GROUP)
    code = OK if key_type in b.coordinator_key_types else ErrorCode.invalid_request
    if ctx.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            c = _denied(ctx, key_type, key) if code == OK else code
            node, address, c = _locate(ctx, key_type, key, c)
            coordinators.append(m.Coordinator(
                key=key, node_id=node, host=address[0], port=address[1], error_code=c,
                error_message=_message(c, ctx.api_version)))
        return build(m.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=tuple(coordinators))
    if code == OK:
        code = _denied(ctx, key_type, request.key)
    node, address, code = _locate(ctx, key_type, request.key, code)
    return build(m.FindCoordinatorResponse, throttle_time=NO_THROTTLE, error_code=code,
                 error_message=_message(code, ctx.api_version), node_id=node, host=address[0], port=address[1])


def _locate(ctx, key_type: int, key: str, code):
    """(node id, (host, port), code): the coordinator's node and address for a client of this
    listener — this node, or in a cluster the node leading the key's internal partition, which
    is COORDINATOR_NOT_AVAILABLE while it is not up."""
    if code != OK:
        return -1, ("", -1), code
    b = ctx.broker
    node = b.coordinator_node(key_type, key)
    address = b.cluster.address(node, ctx.listener) if b.cluster is not None else b.advertised_for(ctx.listener)
    if address is None:
        return -1, ("", -1), ErrorCode.coordinator_not_available
    return node, address, OK


def _denied(ctx, key_type: int, key: str):
    """OK, or the code refusing DESCRIBE on the key's group or transactional id."""
    if key_type == GROUP:
        return OK if _authz.group(ctx, _authz.Op.DESCRIBE, key) else _authz.GROUP_DENIED
    return OK if _authz.transactional_id(ctx, _authz.Op.DESCRIBE, key) else _authz.TXN_DENIED
