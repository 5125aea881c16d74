"""ListTransactions (key 66), v0-1 (KIP-664): filter by state and producer id; v1 adds a
minimum duration (for finding long-running, possibly hanging, transactions)."""

from __future__ import annotations

from ..txn.state import TransactionState
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    known = {s.kafka_name for s in TransactionState}
    states = set(request.state_filters)
    unknown = tuple(sorted(states - known))
    txns = ctx.broker.txn.list(states & known if states else None, set(request.producer_id_filters) or None,
                               getattr(request, "duration_filter", -1))
    if states and not states & known:
        txns = []
    return build(m.ListTransactionsResponse, throttle_time=NO_THROTTLE, error_code=OK, unknown_state_filters=unknown,
                 transaction_states=tuple(m.TransactionState(transactional_id=t.transactional_id, producer_id=t.producer_id,
                                                             transaction_state=t.state.kafka_name) for t in txns))
