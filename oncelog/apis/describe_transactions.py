"""DescribeTransactions (key 65), v0 (KIP-664): state, timeout, start time, producer id and
epoch, and the partitions of each transaction.

ACLs (Kafka's KafkaApis.handleDescribeTransactionsRequest): DESCRIBE on each transactional id,
else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it. In a cluster of nodes (:mod:`oncelog.cluster`),
an id another node coordinates is then NOT_COORDINATOR, described as an unknown id is (the other
ids are described as usual).

Version notes:

DescribeTransactions: v0

- v0: the only version (KIP-664), flexible versions (compact strings and arrays, tagged fields).
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

# Kafka's -1 (no transaction started): kio's field is a non-null datetime, written as
# round(timestamp * 1000), so one millisecond before the epoch encodes -1.
NO_START_TIME = datetime.datetime.fromtimestamp(-0.001, tz=datetime.timezone.utc)
# An id not described (unknown, refused) keeps the schema's defaults, as Kafka sends them:
# producer id 0, epoch 0, start time 0, timeout 0, state "".
EPOCH_ZERO = datetime.datetime.fromtimestamp(0, tz=datetime.timezone.utc)


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    out = []
    for txn_id in request.transactional_ids:
        if not _authz.transactional_id(ctx, _authz.Op.DESCRIBE, txn_id):
            out.append(build(m.TransactionState, error_code=_authz.TXN_DENIED, transactional_id=txn_id,
                             transaction_state="", transaction_timeout=datetime.timedelta(0),
                             transaction_start_time=EPOCH_ZERO, producer_id=0, producer_epoch=0, topics=()))
            continue
        try:
            not_coordinator = ctx.broker.coordinator_error(1, txn_id)
            if not_coordinator is not None:
                raise not_coordinator
            t = ctx.broker.txn.describe(txn_id)
        except KafkaError as exc:  # NotCoordinator, TransactionalIdNotFound
            out.append(build(m.TransactionState, error_code=error_code(exc, API_KEY, ctx.api_version),
                             transactional_id=txn_id,
                             transaction_state="", transaction_timeout=datetime.timedelta(0),
                             transaction_start_time=EPOCH_ZERO, producer_id=0, producer_epoch=0, topics=()))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(t.partitions):
            by_topic.setdefault(topic, []).append(p)
        start = (datetime.datetime.fromtimestamp(t.start_ms / 1000, tz=datetime.timezone.utc)
                 if t.start_ms >= 0 else NO_START_TIME)
        out.append(build(m.TransactionState, error_code=OK, transactional_id=txn_id, transaction_state=t.state.kafka_name,
                         transaction_timeout=datetime.timedelta(milliseconds=t.timeout_ms), transaction_start_time=start,
                         producer_id=t.producer_id, producer_epoch=t.producer_epoch,
                         topics=tuple(m.TopicData(topic=k, partitions=tuple(v)) for k, v in by_topic.items())))
    return build(m.DescribeTransactionsResponse, throttle_time=NO_THROTTLE, transaction_states=tuple(out))
