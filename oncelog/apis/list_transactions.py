"""ListTransactions (key 66), v0-2 (KIP-664): filter by state and producer id; v1 adds a
minimum duration (for finding long-running, possibly hanging, transactions); v2 (KIP-1152) a
regular expression the whole transactional id must match (Kafka's ``Pattern.matches``; null or
empty: no filter; one that does not compile: INVALID_REGULAR_EXPRESSION and nothing listed).
Patterns are Python's ``re``, which reads the common Java syntax alike.

ACLs (Kafka's KafkaApis.handleListTransactionsRequest): only the transactional ids the principal
may DESCRIBE are listed, the others left out silently.
"""

from __future__ import annotations

import re

from kio.schema.errors import ErrorCode

from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    pattern = getattr(request, "transactional_id_pattern", None)
    try:
        matches = re.compile(pattern).fullmatch if pattern else None
    except re.error:
        return build(m.ListTransactionsResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.invalid_regular_expression, unknown_state_filters=(), transaction_states=())
    listing = ctx.broker.txn.list_transactions(set(request.state_filters), set(request.producer_id_filters),
                                               getattr(request, "duration_filter", -1))
    return build(m.ListTransactionsResponse, throttle_time=NO_THROTTLE, error_code=OK,
                 unknown_state_filters=listing.unknown_state_filters,
                 transaction_states=tuple(m.TransactionState(transactional_id=t.transactional_id, producer_id=t.producer_id,
                                                             transaction_state=t.state.kafka_name)
                                          for t in listing.transactions
                                          if (matches is None or matches(t.transactional_id))
                                          and _authz.transactional_id(ctx, _authz.Op.DESCRIBE,
                                                                      t.transactional_id)))
