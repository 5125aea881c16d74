"""ListTransactions (key 66), v0-2 (KIP-664): filter by state and producer id; v1 adds a
minimum duration (for finding long-running, possibly hanging, transactions); v2 (KIP-1152) a
regular expression the whole transactional id must match (Kafka's ``Pattern.matches``; null or
empty: no filter; one that does not compile: INVALID_REGULAR_EXPRESSION and nothing listed).
Patterns are Python's ``re``, which reads the common Java syntax alike.

ACLs (Kafka's KafkaApis.handleListTransactionsRequest): only the transactional ids the principal
may DESCRIBE are listed, the others left out silently.

Version notes:

ListTransactions: v0-2

- v0: the oldest served (KIP-664), flexible versions (compact strings and arrays, tagged fields).
- v1: ``duration_filter`` (KIP-994).
- v2: ``transactional_id_pattern`` (KIP-1152).
"""

from __future__ import annotations

import asyncio
import re

from kio.schema.errors import ErrorCode

from . import _authz
from ._base import NO_THROTTLE, OK, EncodeAside, build, response_module

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 2

# A broker may hold a million ids (transactional.id.expiration.ms is 7 days) and an unfiltered
# listing answers them all, as Kafka's does: the entries are made this many at a time, the event
# loop serving other requests in between, and a long answer is encoded off the loop. At 500,000
# ids the listing held every connection ~9 s on a busy machine before.
CHUNK = 5_000


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    pattern = getattr(request, "transactional_id_pattern", None)
    try:
        matches = re.compile(pattern).fullmatch if pattern else None
    except re.error:
        return build(m.ListTransactionsResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.invalid_regular_expression, unknown_state_filters=(), transaction_states=())
    held, select, unknown = ctx.broker.txn.select_transactions(
        set(request.state_filters), set(request.producer_id_filters), getattr(request, "duration_filter", -1))
    if len(held) <= CHUNK:
        return _response(m, unknown, _entries(ctx, m, held, select, matches))
    return _in_chunks(ctx, m, held, select, unknown, matches)


async def _in_chunks(ctx, m, held, select, unknown, matches):
    entries: list = []
    for start in range(0, len(held), CHUNK):
        entries += _entries(ctx, m, held[start:start + CHUNK], select, matches)
        await asyncio.sleep(0)
    return EncodeAside(_response(m, unknown, tuple(entries)))


def _entries(ctx, m, held, select, matches) -> tuple:
    return tuple(m.TransactionState(transactional_id=t.transactional_id, producer_id=t.producer_id,
                                    transaction_state=t.state.kafka_name)
                 for t in map(select, held)
                 if t is not None and (matches is None or matches(t.transactional_id))
                 and _authz.transactional_id(ctx, _authz.Op.DESCRIBE, t.transactional_id))


def _response(m, unknown: tuple[str, ...], entries: tuple):
    return build(m.ListTransactionsResponse, throttle_time=NO_THROTTLE, error_code=OK,
                 unknown_state_filters=unknown, transaction_states=entries)
