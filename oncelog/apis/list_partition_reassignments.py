"""ListPartitionReassignments (key 46), v0: no reassignment is ever in progress on one broker,
so the answer lists no topics. As Kafka's ReplicationControlManager: topics that do not exist
are left out (no error), like topics with nothing reassigning; null topics = all of them.

ACLs (Kafka's KafkaApis.handleListPartitionReassignmentsRequest): DESCRIBE on the cluster, else
CLUSTER_AUTHORIZATION_FAILED.

Version notes:

ListPartitionReassignments: v0

- v0: the only version (KIP-455), flexible versions (compact strings and arrays, tagged fields).
"""

from __future__ import annotations

from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    if not _authz.cluster(ctx, _authz.Op.DESCRIBE):
        return build(m.ListPartitionReassignmentsResponse, throttle_time=NO_THROTTLE,
                     error_code=_authz.CLUSTER_DENIED, error_message=None, topics=())
    return build(m.ListPartitionReassignmentsResponse, throttle_time=NO_THROTTLE, error_code=OK, error_message=None,
                 topics=())
