"""DescribeTransactions (key 65), v0 (KIP-664): state, timeout, start time, producer id and
epoch, and the partitions of each transaction.

ACLs (Kafka's KafkaApis.handleDescribeTransactionsRequest): DESCRIBE on each transactional id,
else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it.
"""

from __future__ import annotations

import datetime

from ..errors import KafkaError
from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module
from ._txn import error_code

API_KEY = 65
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    out = []
    for txn_id in request.transactional_ids:
        if not _authz.transactional_id(ctx, _authz.Op.DESCRIBE, txn_id):
            out.append(build(m.TransactionState, error_code=_authz.TXN_DENIED, transactional_id=txn_id,
                             transaction_state="", transaction_timeout=datetime.timedelta(0),
                             transaction_start_time=None, producer_id=-1, producer_epoch=-1, topics=()))
            continue
        try:
            t = ctx.broker.txn.describe(txn_id)
        except KafkaError as exc:  # TransactionalIdNotFound
            out.append(build(m.TransactionState, error_code=error_code(exc, API_KEY, ctx.api_version),
                             transactional_id=txn_id,
                             transaction_state="", transaction_timeout=datetime.timedelta(0), transaction_start_time=None,
                             producer_id=-1, producer_epoch=-1, topics=()))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(t.partitions):
            by_topic.setdefault(topic, []).append(p)
        start = (datetime.datetime.fromtimestamp(t.start_ms / 1000, tz=datetime.timezone.utc)
                 if t.start_ms >= 0 else None)
        out.append(build(m.TransactionState, error_code=OK, transactional_id=txn_id, transaction_state=t.state.kafka_name,
                         transaction_timeout=datetime.timedelta(milliseconds=t.timeout_ms), transaction_start_time=start,
                         producer_id=t.producer_id, producer_epoch=t.producer_epoch,
                         topics=tuple(m.TopicData(topic=k, partitions=tuple(v)) for k, v in by_topic.items())))
    return build(m.DescribeTransactionsResponse, throttle_time=NO_THROTTLE, transaction_states=tuple(out))
