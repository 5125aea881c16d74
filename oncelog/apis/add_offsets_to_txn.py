"""AddOffsetsToTxn (key 25), v0-4: adds the group's ``__consumer_offsets`` partition to the
transaction, so TxnOffsetCommit may write there and the markers reach it.

ACLs (Kafka's KafkaApis.handleAddOffsetsToTxnRequest): WRITE on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; READ on the group, else GROUP_AUTHORIZATION_FAILED. In a
cluster of nodes (:mod:`oncelog.cluster`), a transactional id another node coordinates is then
NOT_COORDINATOR, and the transaction is not touched.

Version notes:

AddOffsetsToTxn: v0-4

- v0: the oldest served.
- v1: the schema of v0; the throttle is applied after the answer (KIP-219).
- v2: PRODUCER_FENCED may be answered (KIP-588); below v2 a fenced producer gets
  INVALID_PRODUCER_EPOCH.
- v3: flexible versions (compact strings and arrays, tagged fields).
- v4: TRANSACTION_ABORTABLE may be answered (KIP-890 part 1).
"""

from __future__ import annotations

from . import _authz
from ._base import NO_THROTTLE, build, response_module, reply_later
from ._txn import error_code

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    denied = None
    if not _authz.transactional_id(ctx, _authz.Op.WRITE, request.transactional_id):
        denied = _authz.TXN_DENIED
    elif not _authz.group(ctx, _authz.Op.READ, request.group_id):
        denied = _authz.GROUP_DENIED
    if denied is not None:
        return build(m.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE, error_code=denied)
    not_coordinator = ctx.broker.coordinator_error(1, request.transactional_id)
    if not_coordinator is not None:
        return build(m.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE,
                     error_code=error_code(not_coordinator, API_KEY, ctx.api_version))
    fut, respond = reply_later(lambda error: build(m.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE,
                                                   error_code=error_code(error, API_KEY, ctx.api_version)))
    ctx.broker.txn.add_offsets(request.transactional_id, request.producer_id, request.producer_epoch,
                               request.group_id, respond)
    return fut
