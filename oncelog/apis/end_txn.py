"""EndTxn (key 26), v0-5. Answered once PrepareCommit/PrepareAbort is durable; markers and
the Complete* record follow. v5+ is transaction version 2 (KIP-890 part 2): the epoch is bumped
by every EndTxn and returned, so a late request of this transaction cannot touch the next.

ACLs (Kafka's KafkaApis.handleEndTxnRequest): WRITE on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED and the transaction is left as it is. In a cluster of nodes
(:mod:`oncelog.cluster`), a transactional id another node coordinates is then NOT_COORDINATOR,
and the transaction is not touched.

Version notes:

EndTxn: v0-5

- v0: the oldest served.
- v1: the schema of v0; the throttle is applied after the answer (KIP-219).
- v2: PRODUCER_FENCED may be answered (KIP-588).
- v3: flexible versions (compact strings and arrays, tagged fields).
- v4: TRANSACTION_ABORTABLE may be answered (KIP-890 part 1).
- v5: transaction version 2: every EndTxn bumps the epoch; the producer id and epoch are in the
  answer (KIP-890 part 2).
"""

from __future__ import annotations

from . import _authz
from ._base import NO_THROTTLE, build, response_module, reply_later
from ._txn import producer_answer

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)

    def response(outcome):
        code, pid, epoch = producer_answer(outcome, API_KEY, ctx.api_version)
        return build(m.EndTxnResponse, throttle_time=NO_THROTTLE, error_code=code, producer_id=pid,
                     producer_epoch=epoch)

    if not _authz.transactional_id(ctx, _authz.Op.WRITE, request.transactional_id):
        return build(m.EndTxnResponse, throttle_time=NO_THROTTLE, error_code=_authz.TXN_DENIED, producer_id=-1,
                     producer_epoch=-1)
    not_coordinator = ctx.broker.coordinator_error(1, request.transactional_id)
    if not_coordinator is not None:
        return response(not_coordinator)
    fut, respond = reply_later(response)

    ctx.broker.txn.end_txn(request.transactional_id, request.producer_id, request.producer_epoch,
                           request.committed, ctx.api_version >= 5, respond)
    return fut
