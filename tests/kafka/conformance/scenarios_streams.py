"""KIP-1071 streams groups: StreamsGroupHeartbeat v0 (request checks, topology checks, a join with a
topology whose source topic is missing, a join that is assigned its tasks, heartbeat, leave),
StreamsGroupDescribe v0, ListGroups' "streams" type and DeleteGroups of a streams group.

Invariants: member ids are the client's (random UUID strings, a run's own) and compare by role;
process ids likewise. Every group gets ``streams.initial.rebalance.delay.ms=0`` (its GROUP
resource) before its first member joins, so the first heartbeat computes the assignment on both
brokers (Kafka's default, 3 s, would make the answer depend on timing). Describe answers drop the
client host (the connection's address). Requests go to the group's coordinator.
"""

from __future__ import annotations

import datetime
import uuid

from .framework import DESCRIBE_CONFIGS, ScenarioFailed, mod
from .routing import GROUP as COORDINATOR_GROUP
from .scenarios_admin import GROUP, SET, incremental
from .scenarios_groups import build, scenario

SGH, SGD, LIST_GROUPS, DELETE_GROUPS = 88, 89, 16, 42
AREA = "streams_groups"


def _to(k, request, group: str):
    if not k.router.clustered:
        return k.client.request(request)
    return k.client.on(k.router.address(k.router.coordinator(COORDINATOR_GROUP, group))).request(request)


def topology(*subs, epoch: int = 0):
    """A v0 Topology from (subtopology id, source topics, changelogs [(name, partitions)]) tuples."""
    m = mod(SGH, 0)
    return m.Topology(epoch=epoch, subtopologies=tuple(
        m.Subtopology(subtopology_id=sid, source_topics=tuple(sources),
                      state_changelog_topics=tuple(m.TopicInfo(name=n, partitions=p, replication_factor=0,
                                                               topic_configs=()) for n, p in changelogs),
                      repartition_source_topics=(), copartition_groups=(), **extra)
        for sid, sources, changelogs, *rest in subs for extra in [rest[0] if rest else {}]))


def sgh(k, group: str, member: str, epoch: int, *, topo=None, tasks=None, rebalance_ms: int | None = 30000,
        process: str = "p", instance=None, rack=None):
    """StreamsGroupHeartbeat v0; ``tasks``: the owned active tasks {subtopology: [partitions]} (None:
    not sent; a join sends empty lists)."""
    m = mod(SGH, 0)
    joining = epoch == 0
    owned = None
    if tasks is not None or joining:
        owned = tuple(m.TaskIds(subtopology_id=s, partitions=tuple(ps)) for s, ps in sorted((tasks or {}).items()))
    return _to(k, build(SGH, 0, group_id=group, member_id=member, member_epoch=epoch, endpoint_information_epoch=-1,
                        instance_id=instance, rack_id=rack,
                        rebalance_timeout=datetime.timedelta(milliseconds=rebalance_ms) if joining and rebalance_ms
                        else datetime.timedelta(milliseconds=-1),
                        topology=topo, active_tasks=owned, standby_tasks=() if owned is not None else None,
                        warmup_tasks=() if owned is not None else None, process_id=process if joining else None,
                        user_endpoint=None, client_tags=() if joining else None,
                        task_offsets=() if joining else None, task_end_offsets=() if joining else None,
                        shutdown_application=False), group)


def answer(r, roles: dict[str, str] | None = None):
    """A heartbeat answer, compared: error, message (member ids by role), member id by role, epoch,
    intervals, statuses, tasks."""
    roles = roles or {}
    msg = r.error_message
    for mid, role in roles.items():
        msg = msg.replace(mid, f"<{role}>") if msg else msg
    tasks = None if r.active_tasks is None else sorted((t.subtopology_id, sorted(t.partitions)) for t in r.active_tasks)
    return {"error_code": r.error_code, "error_message": msg, "member": roles.get(r.member_id, r.member_id),
            "member_epoch": r.member_epoch, "heartbeat_interval": r.heartbeat_interval,
            "task_offset_interval": r.task_offset_interval, "acceptable_recovery_lag": r.acceptable_recovery_lag,
            "status": None if r.status is None else [(s.status_code, s.status_detail) for s in r.status],
            "active_tasks": tasks, "standby_tasks": r.standby_tasks, "warmup_tasks": r.warmup_tasks}


def sgd(k, *groups: str, roles: dict[str, str] | None = None):
    """StreamsGroupDescribe v0, the client host dropped and members by role."""
    roles = roles or {}
    resp = _to(k, build(SGD, 0, group_ids=tuple(groups), include_authorized_operations=False), groups[0])
    out = []
    for g in resp.groups:
        topo = None
        if g.topology is not None:
            topo = (g.topology.epoch, None if g.topology.subtopologies is None else [
                (s.subtopology_id, list(s.source_topics), list(s.repartition_sink_topics),
                 [(t.name, t.partitions, t.replication_factor) for t in s.state_changelog_topics],
                 [(t.name, t.partitions, t.replication_factor) for t in s.repartition_source_topics])
                for s in g.topology.subtopologies])
        members = sorted(([roles.get(m.member_id, "?"), m.member_epoch, m.instance_id, m.rack_id, m.client_id,
                           m.topology_epoch, roles.get(m.process_id, m.process_id), m.user_endpoint,
                           sorted((t.subtopology_id, sorted(t.partitions)) for t in m.assignment.active_tasks),
                           sorted((t.subtopology_id, sorted(t.partitions)) for t in m.target_assignment.active_tasks),
                           m.is_classic] for m in g.members), key=lambda row: row[0])
        out.append((g.group_id, g.error_code, g.error_message, g.group_state, g.group_epoch, g.assignment_epoch,
                    topo, members))
    return out


def streams_group(k, base: str = "app") -> str:
    """A group id whose initial rebalance delay is 0 (set before any member joins)."""
    g = k.name(base)
    r = incremental(k, GROUP, g, [("streams.initial.rebalance.delay.ms", SET, "0")])
    if int(r.responses[0].error_code) != 0:
        raise ScenarioFailed(f"streams.initial.rebalance.delay.ms of {base}: {r.responses[0]!r}")
    if k.router.clustered:  # every node has it before the group's coordinator reads it
        m = mod(DESCRIBE_CONFIGS, 4)
        request = m.DescribeConfigsRequest(include_synonyms=False, include_documentation=False, resources=(
            m.DescribeConfigsResource(resource_type=GROUP, resource_name=g,
                                      configuration_keys=("streams.initial.rebalance.delay.ms",)),))

        def everywhere():
            return all(any(c.value == "0" for c in k.client.on(k.router.address(n)).request(request)
                           .results[0].configs) for n in sorted(k.router.nodes))
        k.wait_until(everywhere, f"{base}'s streams.initial.rebalance.delay.ms on every node")
    return g


def _member() -> str:
    return str(uuid.uuid4())


@scenario(AREA)
def stgh_invalid_requests(k):
    """INVALID_REQUEST with Kafka's messages: empty member id, empty group id, empty instance and rack
    ids, a join without a rebalance timeout, without a topology, owning tasks; epoch -3; a topology
    at epoch 1; one task list without the others."""
    t = k.create_topic("in", 1)
    g, m = k.name("g"), _member()
    topo = topology(("0", [t], []))
    mm = mod(SGH, 0)
    one_list = build(SGH, 0, group_id=g, member_id=m, member_epoch=1, endpoint_information_epoch=-1,
                     rebalance_timeout=datetime.timedelta(milliseconds=-1), topology=None,
                     active_tasks=(mm.TaskIds(subtopology_id="0", partitions=(0,)),), standby_tasks=None,
                     warmup_tasks=None, client_tags=None, task_offsets=None, task_end_offsets=None)
    return [answer(r, {m: "m"}) for r in (
        sgh(k, g, "", 0, topo=topo), sgh(k, "", m, 0, topo=topo), sgh(k, g, m, 0, topo=topo, instance=""),
        sgh(k, g, m, 0, topo=topo, rack=""), sgh(k, g, m, 0, topo=topo, rebalance_ms=None), sgh(k, g, m, 0),
        sgh(k, g, m, 0, topo=topo, tasks={"0": [0]}), sgh(k, g, m, -3), sgh(k, g, m, 1, topo=topo),
        _to(k, one_list, g))]


@scenario(AREA)
def stgh_invalid_topologies(k):
    """A topology naming Kafka's internal topics, an invalid topic name, a changelog with a partition
    count (STREAMS_INVALID_TOPOLOGY), a source regex (INVALID_REQUEST "not supported yet")."""
    t = k.create_topic("in", 1)
    g, m = k.name("g"), _member()
    return [answer(r, {m: "m"}) for r in (
        sgh(k, g, m, 0, topo=topology(("0", [t, "__consumer_offsets"], []))),
        sgh(k, g, m, 0, topo=topology(("0", [t, "bad name"], []))),
        sgh(k, g, m, 0, topo=topology(("0", [t], [(k.name("app-store-changelog"), 3)]))),
        sgh(k, g, m, 0, topo=topology(("0", [], [], {"source_topic_regex": ("in.*",)}))))]


@scenario(AREA)
def stgh_missing_source_topics(k):
    """A join whose topology reads a topic that does not exist: the status MISSING_SOURCE_TOPICS, no
    tasks, epoch 2 (a new group starts at 1); StreamsGroupDescribe: NotReady, the topology as sent."""
    g, m = streams_group(k), _member()
    missing = k.name("nowhere")
    first = sgh(k, g, m, 0, topo=topology(("0", [missing], [])), process=m)
    again = sgh(k, g, m, first.member_epoch, tasks={})
    return [answer(first, {m: "m"}), answer(again, {m: "m"}), sgd(k, g, roles={m: "m"})]


@scenario(AREA)
def stgh_join_describe_leave(k):
    """A stateless topology on a topic of 2 partitions: the join is assigned both tasks at once; a
    heartbeat owning them answers no tasks (unchanged); describe: Stable; a leave (-1) answers -1 and
    the group is Empty at the next epoch."""
    t = k.create_topic("in", 2)
    g, m = streams_group(k), _member()
    first = sgh(k, g, m, 0, topo=topology(("0", [t], [])), process=m)
    owned = {tt.subtopology_id: list(tt.partitions) for tt in first.active_tasks or ()}
    same = sgh(k, g, m, first.member_epoch, tasks=owned)
    stable = sgd(k, g, roles={m: "m"})
    left = sgh(k, g, m, -1)
    return [answer(first, {m: "m"}), answer(same, {m: "m"}), stable, answer(left, {m: "m"}),
            sgd(k, g, roles={m: "m"})]


@scenario(AREA)
def stgh_unknown_group_and_member(k):
    """A heartbeat at epoch 1 and a leave to a streams group that does not exist (GROUP_ID_NOT_FOUND);
    an unknown member of an existing group (UNKNOWN_MEMBER_ID); a consumer group's id
    (GROUP_ID_NOT_FOUND "is not a streams group"); describe of a missing group."""
    t = k.create_topic("in", 1)
    g, m, stranger = streams_group(k), _member(), _member()
    sgh(k, g, m, 0, topo=topology(("0", [t], [])), process=m)
    missing = k.name("missing")
    cg = k.name("cg")
    cm = mod(68, 0)
    joined = _to(k, cm.ConsumerGroupHeartbeatRequest(
        group_id=cg, member_id="", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30), subscribed_topic_names=(t,), server_assignor=None,
        topic_partitions=()), cg)
    ids = {m: "m", stranger: "stranger"}
    return [answer(sgh(k, missing, m, 1, tasks={}), ids), answer(sgh(k, missing, m, -1), ids),
            answer(sgh(k, g, stranger, 1, tasks={}), ids), int(joined.error_code),
            answer(sgh(k, cg, m, 0, topo=topology(("0", [t], []))), ids), sgd(k, missing)]


@scenario(AREA)
def stg_list_and_delete(k):
    """ListGroups v5 with the type filter "streams" lists the group (type and protocol type
    "streams"); DeleteGroups of it with a member: NON_EMPTY_GROUP; after the member's leave it is
    deleted, and describe answers GROUP_ID_NOT_FOUND."""
    t = k.create_topic("in", 1)
    g, m = streams_group(k), _member()
    sgh(k, g, m, 0, topo=topology(("0", [t], [])), process=m)
    listed = _to(k, build(LIST_GROUPS, 5, states_filter=(), types_filter=("streams",)), g)
    mine = sorted((x.group_id, x.protocol_type, x.group_state, x.group_type) for x in listed.groups if x.group_id == g)
    busy = _to(k, build(DELETE_GROUPS, 2, groups_names=(g,)), g)
    sgh(k, g, m, -1)
    deleted = _to(k, build(DELETE_GROUPS, 2, groups_names=(g,)), g)
    return [int(listed.error_code), mine, [(r.group_id, r.error_code) for r in busy.results],
            [(r.group_id, r.error_code) for r in deleted.results], sgd(k, g)]
