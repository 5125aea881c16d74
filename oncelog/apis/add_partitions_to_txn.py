"""AddPartitionsToTxn (key 24), v0-5. v0-3: one transaction, from clients. v4+: batched, from
brokers; with ``verify_only`` it only checks that the partitions are in the transaction
(KIP-890 part 1). Unknown partitions get UNKNOWN_TOPIC_OR_PARTITION and the others
OPERATION_NOT_ATTEMPTED; nothing is added then.

ACLs (Kafka's KafkaApis.handleAddPartitionsToTxnRequest): v0-3 need WRITE on the transactional
id (else every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each topic (else
its partitions are TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED); v4+, sent
by brokers, need CLUSTER_ACTION on the cluster (else CLUSTER_AUTHORIZATION_FAILED). Nothing is
added when any is refused.

Version notes:

AddPartitionsToTxn: v0-5

- v0: the oldest served: one transaction, from a client.
- v1: the schema of v0; the throttle is applied after the answer (KIP-219).
- v2: PRODUCER_FENCED may be answered (KIP-588).
- v3: flexible versions (compact strings and arrays, tagged fields); the last client version.
- v4: sent by brokers: several transactions in one request, ``verify_only``, a top-level error code
  (KIP-890 part 1); CLUSTER_ACTION needed.
- v5: TRANSACTION_ABORTABLE may be answered (KIP-890 part 1).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .. import errors
from ..errors import KafkaError
from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module, reply_later
from ._txn import error_code

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 5


def _one(ctx, txn_id, pid, epoch, topics, verify_only, done):
    """Handle one transaction; ``done(code_by_partition)``."""
    broker = ctx.broker
    parts = {(t.name, p) for t in topics for p in t.partitions}
    if not verify_only and ctx.api_version <= 3:
        if not _authz.transactional_id(ctx, _authz.Op.WRITE, txn_id):
            return done({tp: _authz.TXN_DENIED for tp in parts})
        writable = _authz.filter_topics(ctx, _authz.Op.WRITE, {t for t, _ in parts})
        if len(writable) < len({t for t, _ in parts}):
            return done({tp: ErrorCode.operation_not_attempted if tp[0] in writable else _authz.TOPIC_DENIED
                         for tp in parts})
    not_coordinator = broker.coordinator_error(1, txn_id)
    if not_coordinator is not None:  # a cluster's other node coordinates it (oncelog.cluster)
        return done({tp: ErrorCode.not_coordinator for tp in parts})
    unknown = {tp for tp in parts if not broker.partition_exists(*tp)}
    if unknown:
        return done({tp: ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted
                     for tp in parts})
    if verify_only:
        return done({tp: _verify(ctx, txn_id, pid, epoch, tp) for tp in parts})
    # v4+ without verify_only comes from a partition leader adding a Produce v12 batch's
    # partition to its transaction (transaction version 2, oncelog.cluster).
    broker.txn.add_partitions(txn_id, pid, epoch, parts,
                              lambda error: done({tp: error_code(error, API_KEY, ctx.api_version) for tp in parts}),
                              tv2=ctx.api_version >= 4)
    return None


def _verify(ctx, txn_id, pid, epoch, tp):
    """The coordinator's verdict as Kafka's handleVerifyPartitionsInTransaction sends it to the
    broker asking (PRODUCER_FENCED, TRANSACTION_ABORTABLE...: the broker translates them)."""
    try:
        ctx.broker.txn.verify_partition(txn_id, pid, epoch, *tp)
        return OK
    except KafkaError as exc:
        return errors.error_code_for(exc)


def _topic_results(m, codes):
    by_topic: dict[str, list] = {}
    for (topic, p), code in sorted(codes.items()):
        by_topic.setdefault(topic, []).append(m.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code))
    return tuple(m.AddPartitionsToTxnTopicResult(name=t, results_by_partition=tuple(rs)) for t, rs in by_topic.items())


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    if ctx.api_version <= 3:
        fut, respond = reply_later(lambda codes: build(m.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE,
                                                       results_by_topic_v3_and_below=_topic_results(m, codes)))
        _one(ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
             request.v3_and_below_producer_epoch, request.v3_and_below_topics, False, respond)
        return fut
    if not _authz.cluster(ctx, _authz.Op.CLUSTER_ACTION):
        return build(m.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE, error_code=_authz.CLUSTER_DENIED,
                     results_by_transaction=())
    return _batched(ctx, request, m)


async def _batched(ctx, request, m):
    results = []
    for t in request.transactions:
        fut, respond = reply_later(lambda codes: codes)
        _one(ctx, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, t.verify_only, respond)
        codes = await fut
        results.append(m.AddPartitionsToTxnResult(transactional_id=t.transactional_id, topic_results=_topic_results(m, codes)))
    return build(m.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE, error_code=OK,
                 results_by_transaction=tuple(results))
