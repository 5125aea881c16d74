"""Metadata (key 3), v0-13.

One broker leads every partition; in a cluster of nodes (:mod:`oncelog.cluster`) each partition's
leader is its placement's node, every registered node is listed, node 1 is the controller, and a
partition whose node is not up is LEADER_NOT_AVAILABLE (leader -1). Topics a client names that do not exist are created when
``allow_auto_topic_creation`` (v4+; always for v0-3) and the broker's ``auto.create.topics``
setting both allow it; otherwise UNKNOWN_TOPIC_OR_PARTITION. An illegal name gets
INVALID_TOPIC_EXCEPTION. A null topic list means all topics (v1+; v0 uses an empty list).
Topic names are never null in a response to a request by name (librdkafka crashes on that); by
id, an unknown or denied topic's is, as Kafka's (librdkafka asks by id only for the topics of a
KIP-848 assignment, and copes with Kafka's nulls). Topic ids (v10+) may be
requested instead of names (v12+). Authorized operations (v8+) when asked: see ``_acl``.

ACLs (Kafka's KafkaApis.handleTopicMetadataRequest): DESCRIBE on a topic to see it. All topics
asked: those without it are left out, silently (so a client resolving a pattern subscription
from them never learns of them). Named: TOPIC_AUTHORIZATION_FAILED, whether the topic exists or
not. By id (v12+): an unknown id is UNKNOWN_TOPIC_ID (ids are not secret, as in Kafka); a known
one the principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED with its id echoed, as Kafka
answers — both with a null name: the name is never revealed. Auto-creation of a missing topic needs
CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED and nothing is created.
v13's top-level error code (KIP-1102: REBOOTSTRAP_REQUIRED) is always NONE: one broker, never
a reason to send a client back to its bootstrap list.

Version notes:

Metadata: v0-13

- v0: the oldest served: an empty topic list means all topics.
- v1: null topics mean all topics; each broker's rack, the controller id, ``is_internal``.
- v2: the cluster id.
- v3: the throttle time in the answer.
- v4: ``allow_auto_topic_creation``.
- v5: each partition's offline replicas.
- v6: the schema of v5; the throttle is applied after the answer (KIP-219).
- v7: each partition's leader epoch (KIP-320).
- v8: authorized operations of topics and cluster, when asked (KIP-430).
- v9: flexible versions (compact strings and arrays, tagged fields).
- v10: topic ids in the answer (KIP-516).
- v11: no cluster authorized operations (DescribeCluster has them, KIP-700).
- v12: topics may be asked for by id (KIP-516).
- v13: a top-level error code (KIP-1102).
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from .. import errors
from ..cluster import CONTROLLER_ID
from . import _authz
from ._acl import AUTHORIZED_OPERATIONS_OMITTED, authorized
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13

ZERO_UUID = uuid.UUID(int=0)


def handle(ctx, request):
    broker = ctx.broker
    v = ctx.api_version
    m = response_module(API_KEY, v)
    md = broker.metadata
    results = []
    all_topics = request.topics is None or (v == 0 and not request.topics)
    if all_topics:
        visible = _authz.filter_topics(ctx, _authz.Op.DESCRIBE, md.topics)
        wanted = [(t.name, None) for t in md.topics.values() if t.name in visible]
    else:
        wanted = [(t.name, getattr(t, "topic_id", None)) for t in request.topics]
    want_topic_ops = getattr(request, "include_topic_authorized_operations", False)
    cluster_ops = authorized(ctx, _authz.R.CLUSTER, _authz.CLUSTER_NAME,
                             getattr(request, "include_cluster_authorized_operations", False))
    may_create_any = None  # CREATE on the cluster, asked once when needed
    auto_create = broker.config.auto_create_topics and (v < 4 or request.allow_auto_topic_creation)
    for name, topic_id in wanted:
        if name is None and topic_id not in (None, ZERO_UUID):
            topic = md.topics.by_id.get(topic_id)
            if topic is None:
                results.append(_topic_error(m, None, topic_id, errors.UnknownTopicId()))  # Kafka's null
                continue
            if not _authz.topic(ctx, _authz.Op.DESCRIBE, topic.name):
                results.append(_topic_denied(m, None, topic_id))  # the id, not the name
                continue
            name = topic.name
        if not all_topics and not _authz.topic(ctx, _authz.Op.DESCRIBE, name):
            results.append(_topic_denied(m, name or "", topic_id))
            continue
        topic = md.topics.get(name)
        if topic is None:
            try:
                if not auto_create:
                    raise errors.UnknownTopicOrPartition(name)
                if may_create_any is None:
                    may_create_any = _authz.cluster(ctx, _authz.Op.CREATE)
                if not (may_create_any or _authz.topic(ctx, _authz.Op.CREATE, name)):
                    results.append(_topic_denied(m, name, topic_id))
                    continue
                if broker.cluster is not None and not broker.placement.is_controller:
                    # The controller creates it (Kafka's forwarded auto-creation); until this
                    # node has followed, the answer is retriable.
                    broker.cluster.create_on_controller(name)
                    raise errors.LeaderNotAvailable(name)
                topic = md.topics.create_topic(name, -1)
            except errors.KafkaError as exc:
                results.append(_topic_error(m, name or "", ZERO_UUID, exc))
                continue
        partitions = tuple(_partition(m, broker, ctx.listener, topic.name, p) for p in range(topic.partitions))
        results.append(build(m.MetadataResponseTopic, error_code=OK, name=topic.name, topic_id=topic.topic_id,
                             is_internal=topic.internal, partitions=partitions,
                             topic_authorized_operations=authorized(ctx, _authz.R.TOPIC, topic.name,
                                                                    want_topic_ops)))
    brokers = tuple(build(m.MetadataResponseBroker, node_id=node_id, host=host, port=port, rack=None)
                    for node_id, (host, port) in live_nodes(broker, ctx.listener))
    return build(m.MetadataResponse, throttle_time=NO_THROTTLE, brokers=brokers, cluster_id=md.cluster_id,
                 controller_id=controller_id(broker), topics=tuple(results),
                 cluster_authorized_operations=cluster_ops, error_code=OK)


def live_nodes(broker, listener: str) -> list[tuple[int, tuple[str, int]]]:
    """(node id, advertised address) of every node a client of ``listener`` can reach: this
    one, and in a cluster the others that have registered (oncelog.cluster)."""
    if broker.cluster is None:
        return [(broker.node_id, broker.advertised_for(listener))]
    out = []
    for node_id in broker.placement.node_ids():
        address = broker.cluster.address(node_id, listener)
        if address is not None:
            out.append((node_id, address))
    return out


def controller_id(broker) -> int:
    return CONTROLLER_ID if broker.cluster is not None else broker.node_id


def partition_state(broker, listener: str, topic: str, p: int) -> dict:
    """A partition's leadership fields as Metadata and DescribeTopicPartitions answer them: its
    placement's node (one node: this one), or, while that node is not up (starting, or restarting
    after a crash), Kafka's answer for a partition without a live leader (replication factor 1:
    no other replica), LEADER_NOT_AVAILABLE with leader -1."""
    leader = broker.placement.leader(topic, p)
    if broker.cluster is not None and broker.cluster.address(leader, listener) is None:
        return dict(error_code=ErrorCode.leader_not_available, partition_index=p, leader_id=-1, leader_epoch=0,
                    replica_nodes=(leader,), isr_nodes=(), offline_replicas=(leader,))
    return dict(error_code=OK, partition_index=p, leader_id=leader, leader_epoch=0, replica_nodes=(leader,),
                isr_nodes=(leader,), offline_replicas=())


def _partition(m, broker, listener: str, topic: str, p: int):
    return build(m.MetadataResponsePartition, **partition_state(broker, listener, topic, p))


def _topic_denied(m, name, topic_id):
    return build(m.MetadataResponseTopic, error_code=ErrorCode.topic_authorization_failed, name=name,
                 topic_id=topic_id or ZERO_UUID, is_internal=False, partitions=(),
                 topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def _topic_error(m, name, topic_id, exc):
    return build(m.MetadataResponseTopic, error_code=errors.error_code_for(exc), name=name, topic_id=topic_id,
                 is_internal=False, partitions=(), topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
