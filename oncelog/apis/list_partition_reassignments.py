"""ListPartitionReassignments (key 46), v0: no reassignment is ever in progress on one broker,
so the answer lists no topics. As Kafka's ReplicationControlManager: topics that do not exist
are left out (no error), like topics with nothing reassigning; null topics = all of them."""

from __future__ import annotations

from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    return build(m.ListPartitionReassignmentsResponse, throttle_time=NO_THROTTLE, error_code=OK, error_message=None,
                 topics=())
