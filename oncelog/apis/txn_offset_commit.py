"""TxnOffsetCommit (key 28), v0-5: offsets committed inside a transaction.

Checks: the producer id/epoch are the transaction's current ones (fenced otherwise); the group's
offsets partition was added (AddOffsetsToTxn) and the transaction is Ongoing (else
INVALID_TXN_STATE); v3+ with group metadata: generation and member as in OffsetCommit (KIP-447:
a zombie from an older generation gets ILLEGAL_GENERATION). The offsets are written as a
transactional batch and stay pending — invisible to OffsetFetch, UNSTABLE_OFFSET_COMMIT for
require_stable — until the COMMIT marker (or vanish on ABORT)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..errors import KafkaError
from ..groups import records as gr
from ._base import NO_THROTTLE, OK, build, response_module, reply_later
from ._txn import error_code

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    broker = ctx.broker
    try:
        broker.txn.check_txn_offset_commit(request.transactional_id, request.producer_id, request.producer_epoch,
                                           request.group_id)
    except KafkaError as exc:
        error = error_code(exc, API_KEY, ctx.api_version)
    else:
        error = broker.groups.validate_txn_offset_commit(
            request.group_id, getattr(request, "generation_id", -1), getattr(request, "member_id", "") or "",
            getattr(request, "group_instance_id", None))
    codes = {}
    values = {}
    now = broker.clock()
    for t in request.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if error != OK:
                codes[tp] = error
            elif not broker.partition_exists(*tp):
                codes[tp] = ErrorCode.unknown_topic_or_partition
            else:
                codes[tp] = OK
                values[tp] = gr.OffsetValue(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                            p.committed_metadata or "", now)

    def response():
        return build(m.TxnOffsetCommitResponse, throttle_time=NO_THROTTLE, topics=tuple(
            m.TxnOffsetCommitResponseTopic(name=t.name, partitions=tuple(
                m.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=codes[(t.name, p.partition_index)])
                for p in t.partitions)) for t in request.topics))

    if not values:
        return response()
    records = [(gr.encode_key(gr.OffsetKey(request.group_id, t, p)), gr.encode_offset_value(v)) for (t, p), v in values.items()]
    broker.groups.stage_txn_offsets(request.producer_id, request.group_id, values)
    def stored(err):
        if err != OK:
            for tp in values:
                codes[tp] = err
        return response()

    fut, respond = reply_later(stored)
    broker.offsets_topic.persist_transactional(request.group_id, request.producer_id, request.producer_epoch, records,
                                               respond)
    return fut
