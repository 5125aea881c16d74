"""AlterReplicaLogDirs (key 34), v1-2: oncelog has one log directory (``--data-dir``, the one
DescribeLogDirs names), so a replica can only be "moved" to where it is. As a one-node Kafka 4.4
answers (measured against it), per partition:

* a path that is not this broker's log directory: LOG_DIR_NOT_FOUND, for every partition of the
  request, existing or not (the directory is checked first);
* the log directory itself: NONE for a partition that exists (already there), else
  UNKNOWN_TOPIC_OR_PARTITION.

ACLs (Kafka's KafkaApis.handleAlterReplicaLogDirsRequest): ALTER on the cluster, else
CLUSTER_AUTHORIZATION_FAILED for every partition.

Version notes:

AlterReplicaLogDirs: v1-2 (v0, deprecated by KIP-896, is not served)

- v1: the schema of v0; the throttle is applied after the answer (KIP-219).
- v2: flexible versions (compact strings and arrays, tagged fields).
"""

from __future__ import annotations

import os

from kio.schema.errors import ErrorCode

from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 34
MIN_VERSION = 1
MAX_VERSION = 2


def _same_dir(a: str, b: str) -> bool:
    return os.path.normpath(os.path.abspath(a)) == os.path.normpath(os.path.abspath(b))


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    denied = not _authz.cluster(ctx, _authz.Op.ALTER)
    md = ctx.broker.metadata
    results: dict[str, list] = {}
    for d in request.dirs:
        here = _same_dir(d.path, ctx.broker.logs.data_dir)  # DescribeLogDirs' (a node's own, on a cluster)
        for t in d.topics:
            topic = md.topics.get(t.name)
            for p in t.partitions:
                if denied:
                    code = _authz.CLUSTER_DENIED
                elif not here:
                    code = ErrorCode.log_dir_not_found
                elif topic is None or not 0 <= p < topic.partitions:
                    code = ErrorCode.unknown_topic_or_partition
                else:
                    code = OK
                results.setdefault(t.name, []).append(m.AlterReplicaLogDirPartitionResult(partition_index=p,
                                                                                        error_code=code))
    return build(m.AlterReplicaLogDirsResponse, throttle_time=NO_THROTTLE, results=tuple(
        m.AlterReplicaLogDirTopicResult(topic_name=name, partitions=tuple(parts)) for name, parts in results.items()))
