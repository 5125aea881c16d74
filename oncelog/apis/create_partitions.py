"""CreatePartitions (key 37), v0-3: grow a topic's partition count (never shrink). As Kafka's
ControllerApis/ReplicationControlManager: a topic named twice is answered first, once, with
INVALID_REQUEST "Duplicate topic name."; then per topic its existence and new count, the number of
manual assignments (one per new partition), and each assignment (this broker only).

ACLs (Kafka's KafkaApis.handleCreatePartitionsRequest): ALTER on the topic, else
TOPIC_AUTHORIZATION_FAILED and its partition count stays.

Version notes:

CreatePartitions: v0-3

- v0: the oldest served.
- v1: the schema of v0; the throttle is applied after the answer (KIP-219).
- v2: flexible versions (compact strings and arrays, tagged fields).
- v3: the schema of v2; THROTTLING_QUOTA_EXCEEDED may be answered (KIP-599; oncelog has no quotas).
"""

from __future__ import annotations

from .. import errors
from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module
from .create_topics import check_assignments

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    results = []
    # A name given twice: answered first, once, INVALID_REQUEST "Duplicate topic name." and left
    # alone (Kafka's ControllerApis.createPartitions).
    names = [t.name for t in request.topics]
    duplicates = list(dict.fromkeys(n for n in names if names.count(n) > 1))
    for name in duplicates:
        results.append(build(m.CreatePartitionsTopicResult, name=name, error_code=errors.error_code_for(
            errors.InvalidRequest("")), error_message="Duplicate topic name."))
    md = ctx.broker.metadata
    for t in request.topics:
        if t.name in duplicates:
            continue
        code, message = OK, None
        if not _authz.topic(ctx, _authz.Op.ALTER, t.name):
            results.append(build(m.CreatePartitionsTopicResult, name=t.name, error_code=_authz.TOPIC_DENIED,
                                 error_message="The topic authorization is failed."))
            continue
        try:
            # Kafka's order (ReplicationControlManager.createPartitions): the topic and the new
            # count, then the number of assignments, then each assignment.
            md.topics.create_partitions(t.name, t.count, validate_only=True)
            if t.assignments is not None:
                additional = t.count - md.topics.get(t.name).partitions
                if len(t.assignments) != additional:
                    raise errors.InvalidReplicaAssignment(
                        f"Attempted to add {additional} additional partition(s), but only {len(t.assignments)} "
                        "assignment(s) were specified.")
                check_assignments([list(a.broker_ids) for a in t.assignments], ctx.broker.node_id)
            if not request.validate_only:
                md.topics.create_partitions(t.name, t.count)
        except errors.KafkaError as exc:
            code, message = errors.error_code_for(exc), str(exc)
        results.append(build(m.CreatePartitionsTopicResult, name=t.name, error_code=code, error_message=message))
    return build(m.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
