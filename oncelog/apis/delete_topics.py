"""DeleteTopics (key 20), v1-6. Topics are named (v0-5) or named or identified (v6+).

ACLs (Kafka's KafkaApis.handleDeleteTopicsRequest, in KRaft ControllerApis.deleteTopics): DELETE
on the topic, else TOPIC_AUTHORIZATION_FAILED and the topic stays. A topic named by id (v6+) that
the principal may not DELETE is answered with its id echoed and its name only if the principal
may DESCRIBE it, else a null name, as Kafka; an unknown id is UNKNOWN_TOPIC_ID (ids are not
secret). The message is Kafka 4.4's, "Topic authorization failed." (by name and by id).

Version notes:

DeleteTopics: v1-6 (v0, deprecated by KIP-896, is not served)

- v1: the throttle time in the answer.
- v2: the schema of v1; the throttle is applied after the answer (KIP-219).
- v3: the schema of v2; TOPIC_DELETION_DISABLED may be answered (never here).
- v4: flexible versions (compact strings and arrays, tagged fields).
- v5: a per-topic ``error_message``; THROTTLING_QUOTA_EXCEEDED may be answered (KIP-599).
- v6: topics named or identified by id, names may be null; ids in the answer (KIP-516).
"""

from __future__ import annotations

import uuid

from .. import errors
from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 6

ZERO = uuid.UUID(int=0)


async def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    md = ctx.broker.metadata
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, ZERO) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        code, message = OK, None
        try:
            by_id = name is None
            if by_id:
                topic = md.topics.by_id.get(topic_id)
                if topic is None:
                    raise errors.UnknownTopicId("This server does not host this topic ID.")  # Kafka's text
                name = topic.name
            if not _authz.topic(ctx, _authz.Op.DELETE, name):
                shown = name if not by_id or _authz.topic(ctx, _authz.Op.DESCRIBE, name) else None
                results.append(build(m.DeletableTopicResult, name=shown, topic_id=topic_id,
                                     error_code=_authz.TOPIC_DENIED, error_message="Topic authorization failed."))
                continue
            topic = md.topics.get(name)
            if topic is None:
                raise errors.UnknownTopicOrPartition("This server does not host this topic-partition.")  # Kafka's
            topic_id = topic.topic_id
            if topic.internal:
                raise errors.InvalidTopic(f"internal topic {name} cannot be deleted")
            await md.topics.delete_topic(name)
        except errors.KafkaError as exc:
            code, message = errors.error_code_for(exc), str(exc)
        results.append(build(m.DeletableTopicResult, name=name, topic_id=topic_id, error_code=code,
                             error_message=message))
    return build(m.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))
