"""AddOffsetsToTxn (key 25), v0-4: adds the group's ``__consumer_offsets`` partition to the
transaction, so TxnOffsetCommit may write there and the markers reach it."""

from __future__ import annotations

from ._base import NO_THROTTLE, build, response_module, reply_later
from ._txn import error_code

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    fut, respond = reply_later(lambda error: build(m.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE,
                                                   error_code=error_code(error, API_KEY, ctx.api_version)))
    ctx.broker.txn.add_offsets(request.transactional_id, request.producer_id, request.producer_epoch,
                               request.group_id, respond)
    return fut
