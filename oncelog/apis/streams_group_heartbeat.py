"""StreamsGroupHeartbeat (key 88), v0-0: KIP-1071's group API of Kafka Streams
(``group.protocol=streams``) — join with the application's topology (member epoch 0),
heartbeat, leave (-1; -2 is served as -1: static membership is not yet). The coordinator assigns
tasks (:mod:`oncelog.groups.streams_coordinator`); the answer waits until the group's records are
durable. Kafka 4.4 serves v0-1; its client negotiates down to v0 (v1 only adds KIP-1331's
topology description and an int64 recovery lag).

When the group's topology names internal (repartition, changelog) topics that do not exist, the
answer has status MISSING_INTERNAL_TOPICS and the broker creates them, as Kafka's KafkaApis does,
with the partition count the topology decides, the replication factor the client sent (0 or -1:
the broker's default) and the client's topic configs verbatim. A creation error is added to that
status' detail ("; Creation failed: t (error)") for twice the heartbeat interval, during which
the topic is not asked for again (Kafka's error cache). In a cluster of nodes, a coordinator on
another node than the controller asks the controller to create them (CreateTopics over the
nodes' link, as Kafka's coordinator goes through its controller): the answer does not wait, one
creation per topic is in flight, and the status stays until this node has followed the new
topics.

ACLs (Kafka's KafkaApis.handleStreamsGroupHeartbeat): READ on the group, else
GROUP_AUTHORIZATION_FAILED; with a topology, Kafka-internal topic names and invalid names are
STREAMS_INVALID_TOPOLOGY, then any topic of the topology the principal may not DESCRIBE is
TOPIC_AUTHORIZATION_FAILED; creating internal topics needs CREATE on the cluster or on each topic,
else "; Unauthorized to CREATE on topics ..." is added to the status and nothing is created. In a
cluster, a group another node coordinates is NOT_COORDINATOR.

Version notes:

StreamsGroupHeartbeat: v0-0

- v0: the oldest served (KIP-1071), flexible versions; ``acceptable_recovery_lag`` (int32) is
  answered 0, as Kafka 4.4 leaves it.
"""

from __future__ import annotations

import datetime
import weakref

from .. import errors
from ..groups.streams_coordinator import TASK_OFFSET_INTERVAL_MS, HeartbeatRequest
from ..groups.streams_topology import (
    MISSING_INTERNAL_TOPICS, Subtopology, TopicInfo, Topology, check_topic_names,
)
from . import _authz
from ._base import NO_THROTTLE, build, reply_later, response_module
from ._groups import error_code, error_message

API_KEY = 88
MIN_VERSION = 0
MAX_VERSION = 0

SETTINGS = ("session.timeout.ms", "heartbeat.interval.ms", "initial.rebalance.delay.ms", "assignment.interval.ms")


def _tasks(lists):
    if lists is None:
        return None
    return frozenset((t.subtopology_id, p) for t in lists for p in t.partitions)


def _topic(t) -> TopicInfo:
    return TopicInfo(t.name, t.partitions, t.replication_factor, tuple((kv.key, kv.value) for kv in t.topic_configs))


def topology_of(t) -> Topology:
    """The request's topology as the coordinator's immutable one."""
    return Topology(t.epoch, tuple(
        Subtopology(s.subtopology_id, tuple(s.source_topics), tuple(s.source_topic_regex),
                    tuple(_topic(x) for x in s.state_changelog_topics), tuple(s.repartition_sink_topics),
                    tuple(_topic(x) for x in s.repartition_source_topics),
                    tuple((tuple(g.source_topics), tuple(g.source_topic_regex), tuple(g.repartition_source_topics))
                          for g in s.copartition_groups))
        for s in t.subtopologies))


def _settings(ctx, group_id: str) -> dict[str, int]:
    own = ctx.broker.metadata.group_configs.get(group_id) if ctx.broker.metadata.group_configs else {}
    out = {}
    for name in SETTINGS:
        value = own.get("streams." + name)
        if value is not None:
            try:
                out[name] = int(value)
            except ValueError:
                pass  # validated when set
    return out


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)

    def refuse(code, message=None):
        return build(m.StreamsGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=code,
                     error_message=message, member_id="", member_epoch=0, heartbeat_interval=datetime.timedelta(0),
                     acceptable_recovery_lag=0, task_offset_interval=datetime.timedelta(0), status=(),
                     active_tasks=None, standby_tasks=None, warmup_tasks=None, endpoint_information_epoch=0,
                     partitions_by_user_endpoint=None)

    def task_ids(tasks):
        by: dict[str, list[int]] = {}
        for sid, p in tasks:
            by.setdefault(sid, []).append(p)
        return tuple(m.TaskIds(subtopology_id=sid, partitions=tuple(sorted(ps))) for sid, ps in sorted(by.items()))

    def response(result):
        if result.error is not None:
            return refuse(error_code(result.error), error_message(result.error))
        statuses = [list(s) for s in result.statuses]
        if result.to_create:
            detail = create_internal_topics(ctx, result.to_create, result.heartbeat_interval_ms)
            if detail:
                for s in statuses:
                    if s[0] == MISSING_INTERNAL_TOPICS:
                        s[1] += detail
        endpoints = None
        if result.endpoints is not None:
            endpoints = tuple(m.EndpointToPartitions(
                user_endpoint=m.Endpoint(host=host, port=port),
                active_partitions=tuple(m.TopicPartition(topic=t, partitions=tuple(sorted(ps)))
                                        for t, ps in sorted(by_topic.items())),
                standby_partitions=()) for (host, port), by_topic in result.endpoints)
        tasks = result.active
        return build(m.StreamsGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error_code(None),
                     error_message=None, member_id=result.member_id, member_epoch=result.member_epoch,
                     heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
                     acceptable_recovery_lag=0,
                     # a leave's answer has the member id and epoch only (Kafka's streamsGroupLeave)
                     task_offset_interval=datetime.timedelta(
                         milliseconds=TASK_OFFSET_INTERVAL_MS if result.member_epoch >= 0 else 0),
                     status=tuple(m.Status(status_code=c, status_detail=d) for c, d in statuses),
                     active_tasks=task_ids(tasks) if tasks is not None else None,
                     standby_tasks=() if tasks is not None else None, warmup_tasks=() if tasks is not None else None,
                     endpoint_information_epoch=result.endpoint_information_epoch,
                     partitions_by_user_endpoint=endpoints)

    if not _authz.group(ctx, _authz.Op.READ, request.group_id):
        return refuse(_authz.GROUP_DENIED)
    topology = None
    if request.topology is not None:
        topology = topology_of(request.topology)
        names = topology.all_topics()
        try:
            check_topic_names(names)
        except errors.KafkaError as exc:
            return refuse(error_code(exc), str(exc))
        if names and len(_authz.filter_topics(ctx, _authz.Op.DESCRIBE, names)) < len(names):
            return refuse(_authz.TOPIC_DENIED)
    not_coordinator = ctx.broker.coordinator_error(0, request.group_id)
    if not_coordinator is not None:
        return refuse(error_code(not_coordinator), error_message(not_coordinator))
    rebalance = request.rebalance_timeout
    endpoint = request.user_endpoint
    req = HeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        endpoint_information_epoch=request.endpoint_information_epoch, instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=int(rebalance.total_seconds() * 1000) if rebalance is not None else -1,
        topology=topology, active=_tasks(request.active_tasks), standby=_tasks(request.standby_tasks),
        warmup=_tasks(request.warmup_tasks), process_id=request.process_id,
        user_endpoint=(endpoint.host, endpoint.port) if endpoint is not None else None,
        client_tags=tuple((kv.key, kv.value) for kv in request.client_tags) if request.client_tags is not None
        else None,
        task_offsets=tuple(((o.subtopology_id, o.partition), o.offset) for o in request.task_offsets)
        if request.task_offsets is not None else None,
        task_end_offsets=tuple(((o.subtopology_id, o.partition), o.offset) for o in request.task_end_offsets)
        if request.task_end_offsets is not None else None,
        shutdown_application=request.shutdown_application, client_id=ctx.client_id or "",
        client_host="/" + ctx.peer.rsplit(":", 1)[0], settings=_settings(ctx, request.group_id))
    fut, respond = reply_later(response)
    ctx.broker.groups.streams.heartbeat(req, respond)
    return fut


class CreationErrors:
    """Kafka's ExpiringErrorCache (DefaultAutoTopicCreationManager): why an internal topic's
    creation failed, kept for twice the group's heartbeat interval. Meanwhile the topic is not
    asked for again and the MISSING_INTERNAL_TOPICS detail names it. At most :attr:`CAPACITY`
    topics: the one expiring first makes room."""

    CAPACITY = 1000

    def __init__(self) -> None:
        self._errors: dict[str, tuple[int, str]] = {}  # topic -> (expiry ms, message)

    def put(self, name: str, message: str, ttl_ms: int, now_ms: int) -> None:
        self._errors.pop(name, None)
        if len(self._errors) >= self.CAPACITY:
            self._expire(now_ms)
        if len(self._errors) >= self.CAPACITY:
            del self._errors[min(self._errors, key=lambda n: self._errors[n][0])]
        self._errors[name] = (now_ms + ttl_ms, message)

    def get(self, name: str, now_ms: int) -> str | None:
        found = self._errors.get(name)
        if found is None:
            return None
        if found[0] <= now_ms:
            del self._errors[name]
            return None
        return found[1]

    def _expire(self, now_ms: int) -> None:
        for name in [n for n, (expiry, _m) in self._errors.items() if expiry <= now_ms]:
            del self._errors[name]


_CREATION_ERRORS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # broker -> its CreationErrors


def create_internal_topics(ctx, to_create, heartbeat_interval_ms: int) -> str:
    """KafkaApis' creation of a streams group's missing internal topics: CREATE on the cluster or
    each topic; returns what to add to the MISSING_INTERNAL_TOPICS status' detail. The controller
    node creates them at once; another node asks the controller (CreateTopics over the cluster's
    link, one creation in flight per topic) and answers without waiting, as Kafka's coordinator
    does through its controller. A failure is told for twice the heartbeat interval, during which
    the topic is not asked for again (Kafka's error cache)."""
    names = [t[0] for t in to_create]
    if not _authz.cluster(ctx, _authz.Op.CREATE):
        denied = [n for n in names if not _authz.topic(ctx, _authz.Op.CREATE, n)]
        if denied:
            return f"; Unauthorized to CREATE on topics {', '.join(denied)}."
    broker = ctx.broker
    cache = _CREATION_ERRORS.get(broker)
    if cache is None:
        cache = _CREATION_ERRORS[broker] = CreationErrors()
    now = broker.groups.streams.clock()
    ttl = 2 * heartbeat_interval_ms
    remote = broker.cluster is not None and not broker.placement.is_controller
    failed = []
    for name, partitions, rf, configs in to_create:
        if broker.metadata.topics.get(name) is not None:
            continue
        error = cache.get(name, now)
        if error is not None:
            failed.append(f"{name} ({error})")
            continue
        if remote:
            broker.cluster.create_on_controller(
                name, partitions, rf if rf > 0 else -1, tuple(configs),
                on_error=lambda n, message: cache.put(n, message, ttl, broker.groups.streams.clock()))
            continue
        try:
            broker.metadata.topics.create_topic(name, partitions, rf if rf > 0 else -1, dict(configs), strict=False)
        except errors.TopicAlreadyExists:
            pass
        except errors.KafkaError as exc:
            message = f"{type(exc).__name__}: {exc}"
            cache.put(name, message, ttl, now)
            failed.append(f"{name} ({message})")
    if failed:
        shown = ", ".join(failed[:3])
        more = f" and {len(failed) - 3} more" if len(failed) > 3 else ""
        return f"; Creation failed: {shown}{more}."
    return ""
