"""CreatePartitions (key 37), v0-3: grow a topic's partition count (never shrink).

ACLs (Kafka's KafkaApis.handleCreatePartitionsRequest): ALTER on the topic, else
TOPIC_AUTHORIZATION_FAILED and its partition count stays.
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
    for t in request.topics:
        code, message = OK, None
        if not _authz.topic(ctx, _authz.Op.ALTER, t.name):
            results.append(build(m.CreatePartitionsTopicResult, name=t.name, error_code=_authz.TOPIC_DENIED,
                                 error_message="The topic authorization is failed."))
            continue
        try:
            if t.assignments:
                check_assignments([list(a.broker_ids) for a in t.assignments], ctx.broker.node_id)
            ctx.broker.logs.create_partitions(t.name, t.count, validate_only=request.validate_only)
        except errors.KafkaError as exc:
            code, message = errors.error_code_for(exc), str(exc)
        results.append(build(m.CreatePartitionsTopicResult, name=t.name, error_code=code, error_message=message))
    return build(m.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
