"""DescribeCluster (key 60), v0-2: this one broker, which is also the controller (in a cluster of
nodes, every registered node, node 1 the controller: :mod:`oncelog.cluster`). v2
(KIP-1073) may ask for fenced brokers too: there are none, the broker is never fenced.

ACLs (Kafka's KafkaApis.handleDescribeCluster and AuthHelper.computeDescribeClusterResponse):
none needed. Any authenticated principal is answered the cluster id, the controller and the
brokers, as Kafka answers (clients find the cluster with it). Only the authorized operations,
when asked for, depend on DESCRIBE on the cluster: with it, the principal's operations on the
cluster; without it, 0 (no operation), as Kafka.

Version notes:

DescribeCluster: v0-2

- v0: the oldest served (KIP-700), flexible versions (compact strings and arrays, tagged fields).
- v1: ``endpoint_type`` (KIP-919): brokers, or controllers (MISMATCHED_ENDPOINT_TYPE on a broker
  listener).
- v2: ``include_fenced_brokers`` in the request, ``is_fenced`` per broker (KIP-1073): never fenced
  here.
"""

from __future__ import annotations

from . import _authz
from ._acl import authorized
from ._base import NO_THROTTLE, OK, build, response_module
from .metadata import controller_id, live_nodes

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    b = ctx.broker
    asked = getattr(request, "include_cluster_authorized_operations", False)
    if asked and not _authz.cluster(ctx, _authz.Op.DESCRIBE):
        operations = 0
    else:
        operations = authorized(ctx, _authz.R.CLUSTER, _authz.CLUSTER_NAME, asked)
    brokers = tuple(build(m.DescribeClusterBroker, broker_id=node_id, host=host, port=port, rack=None,
                          is_fenced=False) for node_id, (host, port) in live_nodes(b, ctx.listener))
    return build(m.DescribeClusterResponse, throttle_time=NO_THROTTLE, error_code=OK, error_message=None,
                 endpoint_type=1, cluster_id=b.metadata.cluster_id, controller_id=controller_id(b), brokers=brokers,
                 cluster_authorized_operations=operations)
