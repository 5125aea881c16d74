"""DescribeLogDirs (key 35), v1-5: the broker's one log directory (the data dir) and, for the
partitions asked (null topics = every partition, internal topics included), each one's size in
bytes (its segments' log files) and offset lag (Kafka's max(HW - LEO, 0): 0, no replica catches
up here), never a future (AlterReplicaLogDirs) log. v3 adds the top-level error code; v4 the
volume's total and usable bytes (``os.statvfs``, as Java's FileStore); v5 ``is_cordoned``, always
false (no cordoning, KIP-1066). As Kafka's ReplicaManager.describeLogDirs: partitions the broker
does not host are left out, and so are topics with none left.

ACLs (Kafka's KafkaApis.handleDescribeLogDirsRequest): DESCRIBE on the cluster, else
CLUSTER_AUTHORIZATION_FAILED (v3+; below, no log dir described) as Kafka answers.

Version notes:

DescribeLogDirs: v1-5 (v0, deprecated by KIP-896, is not served)

- v1: the schema of v0; the throttle is applied after the answer (KIP-219).
- v2: flexible versions (compact strings and arrays, tagged fields).
- v3: a top-level error code.
- v4: each directory's total and usable bytes (KIP-827).
- v5: each directory's ``is_cordoned`` (KIP-1066): never cordoned here.
"""

from __future__ import annotations

import os

from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 35
MIN_VERSION = 1
MAX_VERSION = 5


def _volume_bytes(path: str) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding ``path``: Java's getTotalSpace and
    getUsableSpace (blocks available to unprivileged users)."""
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    logs = ctx.broker.logs
    if not _authz.cluster(ctx, _authz.Op.DESCRIBE):
        return build(m.DescribeLogDirsResponse, throttle_time=NO_THROTTLE, error_code=_authz.CLUSTER_DENIED,
                     results=())
    wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
    by_topic: dict[str, list] = {}
    for plog in logs.all_logs():
        if wanted is not None and (plog.topic, plog.partition) not in wanted:
            continue
        offset_lag = max(plog.high_watermark - plog.log_end_offset, 0)
        by_topic.setdefault(plog.topic, []).append(m.DescribeLogDirsPartition(
            partition_index=plog.partition, partition_size=plog.size_bytes, offset_lag=offset_lag,
            is_future_key=False))
    topics = tuple(m.DescribeLogDirsTopic(name=name, partitions=tuple(sorted(parts, key=lambda p: p.partition_index)))
                   for name, parts in sorted(by_topic.items()))
    total, usable = _volume_bytes(logs.data_dir)
    result = build(m.DescribeLogDirsResult, error_code=OK, log_dir=logs.data_dir, topics=topics, total_bytes=total,
                   usable_bytes=usable, is_cordoned=False)
    return build(m.DescribeLogDirsResponse, throttle_time=NO_THROTTLE, error_code=OK, results=(result,))
