"""WriteTxnMarkers (key 27), v1-2: write COMMIT/ABORT markers directly — what admin tools use
to abort a hanging transaction (KIP-664) whose coordinator no longer knows it.

Kafka's KafkaApis.handleWriteTxnMarkersRequest: CLUSTER_ACTION on the cluster (in practice only
super users: the brokers themselves) or every partition is CLUSTER_AUTHORIZATION_FAILED and
nothing is written — else any client could commit another producer's open transaction.

Version notes:

WriteTxnMarkers: v1-2 (v0 is not served)

- v1: the oldest served, flexible versions (compact strings and arrays, tagged fields).
- v2: each marker's ``transaction_version``.
"""

from __future__ import annotations

from ..errors import KafkaError
from . import _authz
from ._base import OK, build, response_module, reply_later
from ._txn import error_code

API_KEY = 27
MIN_VERSION = 1
MAX_VERSION = 2


async def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    results = []
    if not _authz.cluster(ctx, _authz.Op.CLUSTER_ACTION):
        return build(m.WriteTxnMarkersResponse, markers=tuple(
            m.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=tuple(
                m.WritableTxnMarkerTopicResult(name=t.name, partitions=tuple(
                    m.WritableTxnMarkerPartitionResult(partition_index=p, error_code=_authz.CLUSTER_DENIED)
                    for p in t.partition_indexes)) for t in marker.topics))
            for marker in request.markers))
    for marker in request.markers:
        parts = {(t.name, p) for t in marker.topics for p in t.partition_indexes}
        fut, respond = reply_later(lambda error: error)
        try:
            results_by_partition = ctx.broker.markers.write(
                marker.producer_id, marker.producer_epoch, bool(marker.transaction_result), parts, respond,
                marker.coordinator_epoch)
        except KafkaError as exc:  # a marker the log refused (a full disk): every partition's answer
            results_by_partition = {}
            respond(exc)
        codes = {tp: error_code(e, API_KEY, ctx.api_version) for tp, e in results_by_partition.items()}
        err = error_code(await fut, API_KEY, ctx.api_version)
        topics = tuple(
            m.WritableTxnMarkerTopicResult(name=t.name, partitions=tuple(
                m.WritableTxnMarkerPartitionResult(partition_index=p, error_code=codes.get((t.name, p), err)
                                                   if err == OK else err)
                for p in t.partition_indexes))
            for t in marker.topics)
        results.append(m.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics))
    return build(m.WriteTxnMarkersResponse, markers=tuple(results))
