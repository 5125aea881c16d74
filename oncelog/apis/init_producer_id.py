"""InitProducerId (key 22), v0-5: producer ids for idempotent producers.

Without a transactional id: a fresh producer id at epoch 0, never reused (see
:mod:`oncelog.metadata.producer_ids`), whatever id and epoch the request names — Kafka's
TransactionCoordinator "blindly" allocates a new one (a KIP-360 re-initialisation of an
idempotent producer thus starts over with a new id at sequence 0).
With a transactional id the transaction coordinator answers (epoch bump fencing the previous
instance; CONCURRENT_TRANSACTIONS while its open transaction is aborted or completed). In a cluster
of nodes (:mod:`oncelog.cluster`), a transactional id another node coordinates is
NOT_COORDINATOR (after the ACL check; nothing is allocated or recorded); without a
transactional id any node answers.

ACLs (Kafka's KafkaApis.handleInitProducerIdRequest): with a transactional id, WRITE on it, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; without, IDEMPOTENT_WRITE on the cluster or WRITE on some
topic (Kafka 3.x+), else CLUSTER_AUTHORIZATION_FAILED. No id is allocated when refused.

Version notes:

InitProducerId: v0-5

- v0: the oldest served.
- v1: the schema of v0; the throttle is applied after the answer (KIP-219).
- v2: flexible versions (compact strings and arrays, tagged fields).
- v3: ``producer_id`` and ``producer_epoch`` in the request, to resume after an error (KIP-360).
- v4: PRODUCER_FENCED may be answered (KIP-588).
- v5: TRANSACTION_ABORTABLE may be answered (KIP-890 part 1).
"""

from __future__ import annotations

import logging

from .. import errors
from ..notices import notice
from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module, reply_later
from ._txn import producer_answer

log = logging.getLogger("oncelog.txn")

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    ids = ctx.broker.metadata.producer_ids
    code, pid, epoch = OK, -1, -1
    if request.transactional_id is not None:
        if not _authz.transactional_id(ctx, _authz.Op.WRITE, request.transactional_id):
            code = _authz.TXN_DENIED
    elif not _authz.idempotent_write(ctx):
        code = _authz.CLUSTER_DENIED
    if code != OK:
        return build(m.InitProducerIdResponse, throttle_time=NO_THROTTLE, error_code=code, producer_id=-1,
                     producer_epoch=-1)
    if request.transactional_id is not None:
        # an empty id is INVALID_REQUEST on every node of a cluster (Kafka checks it before the coordinator)
        not_coordinator = ctx.broker.coordinator_error(1, request.transactional_id) if request.transactional_id else None
        if not_coordinator is not None:
            err, pid, epoch = producer_answer(not_coordinator, API_KEY, ctx.api_version)
            return build(m.InitProducerIdResponse, throttle_time=NO_THROTTLE, error_code=err, producer_id=pid,
                         producer_epoch=epoch)

        def response(outcome):
            err, pid, epoch = producer_answer(outcome, API_KEY, ctx.api_version)
            if err == OK and epoch > 0:
                notice(log, "transactional id %s: InitProducerId from client %s (%s) moved producer id %d to epoch "
                       "%d: any earlier instance is fenced", request.transactional_id, ctx.client_id, ctx.peer, pid,
                       epoch)
            return build(m.InitProducerIdResponse, throttle_time=NO_THROTTLE, error_code=err,
                         producer_id=pid, producer_epoch=epoch)

        fut, respond = reply_later(response)

        ctx.broker.txn.init_producer_id(
            request.transactional_id, int(request.transaction_timeout.total_seconds() * 1000),
            getattr(request, "producer_id", -1), getattr(request, "producer_epoch", -1), respond)
        return fut
    else:
        try:
            pid, epoch = ids.allocate(), 0
        except errors.KafkaError as exc:  # no block of ids could be reserved (a full disk): retriable
            code = errors.error_code_for(exc)
    return build(m.InitProducerIdResponse, throttle_time=NO_THROTTLE, error_code=code, producer_id=pid,
                 producer_epoch=epoch)
