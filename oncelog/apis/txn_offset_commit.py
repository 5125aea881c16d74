"""TxnOffsetCommit (key 28), v0-5: offsets committed inside a transaction.

Checks: the producer id/epoch are the transaction's current ones (else INVALID_PRODUCER_EPOCH
at every version, as Kafka 4.x's verification answers); the group's
offsets partition was added (AddOffsetsToTxn) and the transaction is Ongoing (else
INVALID_TXN_STATE; at v4, whose clients know it, TRANSACTION_ABORTABLE, as Kafka's verification
answers). v5+ is transaction version 2 (KIP-890 part 2): a client then sends no
AddOffsetsToTxn (kafka-clients 4.x), and the group's offsets partition joins the transaction
implicitly, starting it if none is open, as a Produce v12 adds its partition — Kafka's
``txnOffsetCommitRequestVersionToTransactionSupportedOperation`` (v5+: ADD_PARTITION) in the
group coordinator's verification; an error of that add (CONCURRENT_TRANSACTIONS while the last
transaction completes, a fenced epoch) is every partition's answer. v3+ with group metadata:
generation and member as in OffsetCommit (KIP-447: a zombie from an older generation gets
ILLEGAL_GENERATION). The offsets are written as a
transactional batch and, once durable (not before: a failed write must leave nothing staged that
a later COMMIT could install), stay pending — invisible to OffsetFetch, UNSTABLE_OFFSET_COMMIT for
require_stable — until the COMMIT marker (or vanish on ABORT).

ACLs (Kafka's KafkaApis.handleTxnOffsetCommitRequest), before everything else: WRITE on the
transactional id (else every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the
group (else GROUP_AUTHORIZATION_FAILED), READ on each topic (else its partitions are
TOPIC_AUTHORIZATION_FAILED, nothing staged for them).

Version notes:

TxnOffsetCommit: v0-5

- v0: the oldest served.
- v1: the schema of v0; the throttle is applied after the answer (KIP-219).
- v2: each partition's committed leader epoch (KIP-320).
- v3: flexible versions (compact strings and arrays, tagged fields); the group's generation, member
  id and instance id (KIP-447).
- v4: TRANSACTION_ABORTABLE may be answered (KIP-890 part 1).
- v5: transaction version 2: the offsets partition joins the transaction implicitly, no
  AddOffsetsToTxn (KIP-890 part 2).
"""

from __future__ import annotations

import asyncio

from .. import errors
from ..errors import KafkaError
from ..groups import records as gr
from kio.schema.errors import ErrorCode

from . import _authz
from ._base import NO_THROTTLE, build, response_module, reply_later
from ._txn import error_code

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 5


ABORTABLE_SINCE = 4  # verification failures are TRANSACTION_ABORTABLE (KIP-890 part 1)
IMPLICIT_ADD_SINCE = 5  # transaction version 2: the offsets partition joins without AddOffsetsToTxn


_LOCAL = object()  # _commit's ``remote`` when the transaction coordinator is this node


def handle(ctx, request):
    b = ctx.broker
    if (b.cluster is not None and b.coordinator_error(0, request.group_id) is None
            and b.coordinator_node(1, request.transactional_id) != b.node_id):
        return _verify_remotely_then_commit(ctx, request)
    if ctx.api_version >= IMPLICIT_ADD_SINCE and _adds_offsets_partition(ctx, request):
        return _add_then_commit(ctx, request)
    return _commit(ctx, request)


def _adds_offsets_partition(ctx, request) -> bool:
    """TV2: the request may write (ACLs) and the group's offsets partition is not yet in the
    producer's Ongoing transaction. An unknown producer is not added: the checks answer it."""
    if not (_authz.transactional_id(ctx, _authz.Op.WRITE, request.transactional_id)
            and _authz.group(ctx, _authz.Op.READ, request.group_id)):
        return False
    txn = ctx.broker.txn
    return txn.needs_partition_added(request.transactional_id, request.producer_id,
                                     *txn.offsets_partition(request.group_id))


async def _add_then_commit(ctx, request):
    added = asyncio.get_running_loop().create_future()
    txn = ctx.broker.txn
    txn.add_partitions(request.transactional_id, request.producer_id, request.producer_epoch,
                       {txn.offsets_partition(request.group_id)},
                       lambda err: added.done() or added.set_result(err), tv2=True)
    result = _commit(ctx, request, await added)
    return (await result) if isinstance(result, asyncio.Future) else result


async def _verify_remotely_then_commit(ctx, request):
    """A cluster (oncelog.cluster) whose transaction coordinator for this producer is another
    node: it is asked whether the group's offsets partition is in the Ongoing transaction
    (AddPartitionsToTxn v5 ``verify_only``; from v5, transaction version 2, to add it), and its
    verdict stands in for the local check. Asked only of a request the ACLs allow."""
    b = ctx.broker
    verdict = None
    if _authz.transactional_id(ctx, _authz.Op.WRITE, request.transactional_id) and \
            _authz.group(ctx, _authz.Op.READ, request.group_id):
        tp = (b.offsets_topic.name, b.offsets_topic.partition_for(request.group_id))
        verdicts = await b.cluster.verify_remote(request.transactional_id, request.producer_id,
                                                 request.producer_epoch, {tp},
                                                 add=ctx.api_version >= IMPLICIT_ADD_SINCE)
        verdict = verdicts[tp]
        if isinstance(verdict, (errors.TransactionAbortable, errors.ConcurrentTransactions)):
            verdict = errors.InvalidTxnState(f"transactional id {request.transactional_id!r}: the offsets of group "
                                             f"{request.group_id!r} are not in an Ongoing transaction")
        elif isinstance(verdict, errors.NotEnoughReplicas):
            verdict = errors.CoordinatorNotAvailable(str(verdict))
    result = _commit(ctx, request, remote=verdict)
    return (await result) if isinstance(result, asyncio.Future) else result


def _commit(ctx, request, add_error: KafkaError | None = None, remote=_LOCAL):
    m = response_module(API_KEY, ctx.api_version)
    broker = ctx.broker
    error: KafkaError | ErrorCode | None = None
    readable = set()
    check = None  # a consumer group's per-partition check (KIP-1251), if any
    if not _authz.transactional_id(ctx, _authz.Op.WRITE, request.transactional_id):
        error = _authz.TXN_DENIED
    elif not _authz.group(ctx, _authz.Op.READ, request.group_id):
        error = _authz.GROUP_DENIED
    elif add_error is not None:
        error = add_error
    else:
        readable = _authz.filter_topics(ctx, _authz.Op.READ, (t.name for t in request.topics))
        try:
            not_coordinator = broker.coordinator_error(0, request.group_id)
            if not_coordinator is not None:
                raise not_coordinator
            if remote is _LOCAL:
                broker.txn.check_txn_offset_commit(request.transactional_id, request.producer_id,
                                                   request.producer_epoch, request.group_id)
            elif remote is not None:
                raise remote
            check = broker.groups.validate_txn_offset_commit(
                request.group_id, getattr(request, "generation_id", -1), getattr(request, "member_id", "") or "",
                getattr(request, "group_instance_id", None))
        except errors.InvalidTxnState as exc:
            # v4 (KIP-890 part 1, Kafka's GENERIC_ERROR_SUPPORTED verification): a commit outside
            # the transaction is TRANSACTION_ABORTABLE, which a client recovers from by aborting;
            # older versions know only INVALID_TXN_STATE.
            error = ErrorCode.transaction_abortable if ctx.api_version == ABORTABLE_SINCE else exc
        except KafkaError as exc:
            error = exc
        if check is not None and error is None:
            # One partition the member may not commit at this epoch refuses the whole commit (Kafka).
            error = next((e for e in (check(t.name, p.partition_index) for t in request.topics
                                      if t.name in readable for p in t.partitions
                                      if broker.partition_exists(t.name, p.partition_index))
                          if e is not None), None)
    if isinstance(error, errors.ProducerFenced):
        # Kafka 4.x verifies the producer through AddPartitionsToTxnManager, which answers a
        # fenced epoch INVALID_PRODUCER_EPOCH at every version ("Producers expect to handle
        # INVALID_PRODUCER_EPOCH in this scenario").
        error = errors.InvalidProducerEpoch(str(error))
    # Per partition None (staged), the domain error or an ACL refusal's code; mapped to codes in
    # the response.
    results: dict[tuple[str, int], KafkaError | ErrorCode | None] = {}
    values = {}
    now = broker.clock()
    for t in request.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if error is not None:
                results[tp] = error
            elif t.name not in readable:
                results[tp] = _authz.TOPIC_DENIED
            elif not broker.partition_exists(*tp):
                results[tp] = errors.UnknownTopicOrPartition(f"TxnOffsetCommit: no partition {tp[0]}-{tp[1]}")
            else:
                results[tp] = None
                values[tp] = gr.OffsetValue(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                            p.committed_metadata or "", now)

    def response():
        return build(m.TxnOffsetCommitResponse, throttle_time=NO_THROTTLE, topics=tuple(
            m.TxnOffsetCommitResponseTopic(name=t.name, partitions=tuple(
                m.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=_code(results[(t.name, p.partition_index)], ctx.api_version))
                for p in t.partitions)) for t in request.topics))

    if not values:
        return response()
    records = [(gr.encode_key(gr.OffsetKey(request.group_id, t, p)), gr.encode_offset_value(v)) for (t, p), v in values.items()]
    def stored(err: KafkaError | None):
        # Staged only once the write is durable: staged offsets become the group's committed
        # offsets at the COMMIT marker, and offsets that are not in the log would vanish at the
        # next restart (the consumer would then re-process: duplicates). Markers are appended
        # after this write and reported durable after it, so none can settle the producer's
        # transaction before these offsets are staged.
        if err is not None:
            for tp in values:
                results[tp] = err
        else:
            broker.groups.stage_txn_offsets(request.producer_id, request.group_id, values)
        return response()

    fut, respond = reply_later(stored)
    broker.offsets_topic.persist_transactional(request.group_id, request.producer_id, request.producer_epoch, records,
                                               respond)
    return fut


def _code(result, api_version: int) -> ErrorCode:
    """A partition's result as a wire code: an ACL refusal is one already."""
    return result if isinstance(result, ErrorCode) else error_code(result, API_KEY, api_version)
