"""The streams group coordinator (KIP-1071): StreamsGroupHeartbeat (join, heartbeat, leave),
timers, replay, and the member checks of offset commits. Sans-IO, as the consumer coordinator:
time from ``clock()``, durable effects through ``persist``, topics through ``topics()``.

Kafka 4.4's GroupMetadataManager.streamsGroupHeartbeat, step by step (:meth:`heartbeat`):

1. Check the request (:meth:`_check`: Kafka's throwIfStreamsGroupHeartbeatRequestIsInvalid and
   the topology's checks, :func:`~.streams_topology.check_topology`).
2. A leave (-1; -2 is handled as -1 here: static membership is not served yet): the member goes,
   the group epoch is bumped.
3. The group: a join creates it (an empty classic group with the id is converted, keeping its
   offsets); any other group type is GROUP_ID_NOT_FOUND "Group X is not a streams group.".
4. The member: new on join (up to :data:`MAX_MEMBERS`), else known (UNKNOWN_MEMBER_ID) at its
   epoch or, its answer lost, its previous one owning no more than its assignment
   (FENCED_MEMBER_EPOCH otherwise).
5. Its metadata (a change bumps the group epoch); the group's topology is set by the first join
   (a stale one gets status STALE_TOPOLOGY; the same or newer epoch with other content is
   INVALID_REQUEST "Topology updates are not supported yet."); the topology is configured against
   the topics (:func:`~.streams_topology.configure`) when they changed (a hash of the required
   topics); once ready its epoch is the validated one (a bump).
6. The target assignment, when the group epoch is ahead: after the initial rebalance delay of a
   new group (``streams.initial.rebalance.delay.ms``) and at most once per
   ``streams.assignment.interval.ms`` (status ASSIGNMENT_DELAYED meanwhile), by the sticky
   assignor (:mod:`.streams_assignor`); empty while the topology is not ready.
7. The member is reconciled one step (:func:`~.streams_group.next_assignment`).
8. Its session restarts; the answer: statuses, tasks when they changed or on join, endpoints.

Every change is written as Kafka's records (:mod:`.streams_records`) before the answer; if they
are not durable the group is put back as it was and the member gets the storage error.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Mapping

from .. import errors
from ..errors import KafkaError
from ..notices import notice
from . import streams_records as sr
from .streams_assignor import MemberSpec, assign
from .streams_group import (
    JOIN, LEAVE, LEAVE_STATIC, STABLE, UNREVOKED_TASKS, StreamsGroup, StreamsMember, current_assignment_record,
    group_epoch_record, member_metadata_record, member_tombstones, next_assignment, target_epoch_record,
    target_member_record, topology_record,
)
from .streams_topology import (
    ASSIGNMENT_DELAYED, SHUTDOWN_APPLICATION, STALE_TOPOLOGY, Topology, check_topology, configure, metadata_hash,
)

log = logging.getLogger("oncelog.groups")

MAX_MEMBERS = 1000  # members of one streams group (Kafka: group.streams.max.size, default unbounded)
MAX_GROUPS = 10_000  # streams groups of one coordinator
MAX_TASK_OFFSETS = 100_000  # task offsets kept per member
DEFAULTS = {"session.timeout.ms": 45000, "heartbeat.interval.ms": 5000, "initial.rebalance.delay.ms": 3000,
            "assignment.interval.ms": 1000}
TASK_OFFSET_INTERVAL_MS = 60000

Task = tuple[str, int]


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = -1
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    active: frozenset[Task] | None = None
    standby: frozenset[Task] | None = None
    warmup: frozenset[Task] | None = None
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    task_offsets: tuple[tuple[Task, int], ...] | None = None
    task_end_offsets: tuple[tuple[Task, int], ...] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""
    settings: Mapping[str, int] | None = None  # the group's own streams.* configs (no prefix), None: keep


@dataclass(frozen=True)
class HeartbeatResult:
    error: KafkaError | None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    statuses: tuple[tuple[int, str], ...] = ()
    active: frozenset[Task] | None = None  # None: unchanged, not sent
    endpoint_information_epoch: int = 0
    endpoints: tuple | None = None  # ((host, port), {topic: [partitions]}) per member with an endpoint
    to_create: tuple = ()  # internal topics to create: (name, partitions, replication factor, configs)


class StreamsGroupCoordinator:
    def __init__(self, groups: dict, clock: Callable[[], int], persist,
                 topics: Callable[[], Mapping[str, tuple]]) -> None:
        self.groups = groups
        self.clock = clock
        self.persist = persist
        self.topics = topics
        # group id -> its own streams.* configs (no prefix), as the last heartbeat brought them
        self.settings: dict[str, Mapping[str, int]] = {}

    def setting(self, group_id: str, name: str) -> int:
        """A ``streams.<name>`` setting of the group: its own config, else Kafka's default."""
        return int(self.settings.get(group_id, {}).get(name, DEFAULTS[name]))

    # ------------------------------------------------------------------ heartbeat

    def heartbeat(self, req: HeartbeatRequest, respond: Callable[[HeartbeatResult], None]) -> None:
        try:
            self._check(req)
        except KafkaError as exc:
            return respond(HeartbeatResult(exc, req.member_id, req.member_epoch))
        if req.member_epoch in (LEAVE, LEAVE_STATIC):
            return self._leave(req, respond)
        existing = self.groups.get(req.group_id)
        before = existing.snapshot() if isinstance(existing, StreamsGroup) else None
        records: list = []
        if req.settings is not None:
            if req.settings:
                self.settings[req.group_id] = dict(req.settings)
            else:
                self.settings.pop(req.group_id, None)
        try:
            result = self._heartbeat(req, records, self.clock())
        except KafkaError as exc:
            self._put_back(req.group_id, existing, before)
            return respond(HeartbeatResult(exc, req.member_id, req.member_epoch))
        self.write(req.group_id, existing, before, records, result, respond)
        return None

    @staticmethod
    def _check(req: HeartbeatRequest) -> None:
        """Step 1: GroupCoordinatorService.throwIfStreamsGroupHeartbeatRequestIsInvalid."""
        invalid = errors.InvalidRequest
        if req.member_id == "":
            raise invalid("MemberId can't be empty.")
        if req.group_id == "":
            raise invalid("GroupId can't be empty.")
        if req.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if req.rack_id == "":
            raise invalid("RackId can't be empty.")
        if req.member_epoch == JOIN:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            for name, tasks in (("ActiveTasks", req.active), ("StandbyTasks", req.standby),
                                ("WarmupTasks", req.warmup)):
                if tasks:
                    raise invalid(f"{name} must be empty when (re-)joining.")
            if req.topology is None:
                raise invalid("Topology must be non-null when (re-)joining.")
            check_topology(req.topology)
        elif req.member_epoch == LEAVE_STATIC:
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif req.member_epoch < LEAVE_STATIC:
            raise invalid(f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2.")
        lists = (req.active, req.standby, req.warmup)
        if any(t is not None for t in lists) and any(t is None for t in lists):
            raise invalid("If one task-type is non-null, all must be non-null.")
        if req.member_epoch != JOIN and req.topology is not None:
            raise invalid("Topology can only be provided when (re-)joining.")

    def _group(self, group_id: str, create: bool, now: int) -> StreamsGroup:
        """Step 3 (getOrCreateStreamsGroup / getStreamsGroupOrThrow)."""
        group = self.groups.get(group_id)
        if isinstance(group, StreamsGroup) and not group.dead:
            return group
        if group is None or group.is_dead():
            if not create:
                raise errors.GroupIdNotFound(f"Streams group {group_id} not found.")
        elif not (create and group.group_type == "classic" and group.is_empty()):
            raise errors.GroupIdNotFound(f"Group {group_id} is not a streams group.")
        if sum(isinstance(g, StreamsGroup) for g in self.groups.values()) >= MAX_GROUPS:
            raise errors.GroupMaxSizeReached(f"The coordinator holds {MAX_GROUPS} streams groups, its maximum.")
        offsets = group.offsets if group is not None and not group.is_dead() else None
        new = self.groups[group_id] = StreamsGroup(group_id, now, offsets)
        return new

    def _member(self, group: StreamsGroup, req: HeartbeatRequest) -> tuple[StreamsMember, bool]:
        """Step 4."""
        member = group.members.get(req.member_id)
        if member is None:
            if req.member_epoch != JOIN:
                raise errors.UnknownMemberId(f"Member {req.member_id} is not a member of group {group.group_id}.")
            if len(group.members) >= MAX_MEMBERS:
                raise errors.GroupMaxSizeReached(f"The streams group has reached its maximum capacity of "
                                                 f"{MAX_MEMBERS} members.")
            notice(log, "group %s: member %s joins the streams group", group.group_id, req.member_id)
            return StreamsMember(req.member_id), True
        epoch = req.member_epoch
        if epoch == JOIN:
            return member, False
        if epoch > member.member_epoch:
            raise errors.FencedMemberEpoch(
                f"The streams group member has a greater member epoch ({epoch}) than the one known by the group "
                f"coordinator ({member.member_epoch}). The member must abandon all its tasks and rejoin.")
        if epoch < member.member_epoch:
            owned_ok = req.active is None or req.active <= set(member.active)
            if epoch != member.previous_member_epoch or not owned_ok:
                raise errors.FencedMemberEpoch(
                    f"The streams group member has a smaller member epoch ({epoch}) than the one known by the group "
                    f"coordinator ({member.member_epoch}). The member must abandon all its tasks and rejoin.")
        return member, False

    def _heartbeat(self, req: HeartbeatRequest, records: list, now: int) -> HeartbeatResult:
        gid = req.group_id
        joining = req.member_epoch == JOIN
        group = self._group(gid, joining, now)
        was_empty = not group.members
        member, new = self._member(group, req)
        old_active = set(member.active)
        old_endpoint = member.user_endpoint
        # Step 5. Metadata.
        old = member.metadata()
        if req.instance_id is not None:
            member.instance_id = req.instance_id
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.topology is not None:
            member.topology_epoch = req.topology.epoch
        member.client_id, member.client_host = req.client_id, req.client_host
        if req.process_id is not None:
            member.process_id = req.process_id
        if req.client_tags is not None:
            member.client_tags = req.client_tags
        if joining or req.user_endpoint is not None:
            member.user_endpoint = req.user_endpoint
        group.members[member.member_id] = member
        bump = False
        if new or member.metadata() != old:
            records.append(member_metadata_record(gid, member))
            bump = True
        # The topology: set by the first join; never updated (Kafka 4.4).
        if req.topology is not None:
            if group.topology is None:
                group.topology, group.configured = req.topology, None
                records.append(topology_record(group))
            elif req.topology.epoch >= group.topology.epoch and req.topology != group.topology:
                raise errors.InvalidRequest("Topology updates are not supported yet.")
        # Configured against the topics, again when they changed.
        topics = self.topics()
        if group.topology is not None:
            h = metadata_hash(group.topology, topics)
            if group.configured is None or h != group.metadata_hash:
                if h != group.metadata_hash:
                    group.metadata_hash, bump = h, True
                group.configured = configure(group.topology, topics)
        cfg = group.configured
        if cfg is not None and cfg.ready:
            if group.validated_topology_epoch != group.topology.epoch:
                group.validated_topology_epoch, bump = group.topology.epoch, True
            for tasks in (req.active, req.standby, req.warmup):
                for sid, p in tasks or ():
                    if sid not in cfg.tasks:
                        raise errors.InvalidRequest(f"Subtopology {sid} does not exist in the topology.")
                    if not 0 <= p < cfg.tasks[sid]:
                        raise errors.InvalidRequest(f"Task {p} for subtopology {sid} is invalid. Number of tasks "
                                                    f"for this subtopology: {cfg.tasks[sid]}")
        if req.task_offsets is not None:
            member.task_offsets = dict(req.task_offsets[:MAX_TASK_OFFSETS])
        if req.task_end_offsets is not None:
            member.task_end_offsets = dict(req.task_end_offsets[:MAX_TASK_OFFSETS])
        if bump:
            group.group_epoch += 1
            records.append(group_epoch_record(group))
            notice(log, "group %s: streams group epoch bumped to %d", gid, group.group_epoch)
            delay = self.setting(gid, "initial.rebalance.delay.ms")
            if was_empty and delay > 0 and group.initial_delay_deadline_ms is None:
                group.initial_delay_deadline_ms = now + delay
        # Step 6. The target assignment.
        statuses: list[tuple[int, str]] = []
        if group.group_epoch > group.assignment_epoch:
            if group.initial_delay_deadline_ms is not None and now < group.initial_delay_deadline_ms:
                statuses.append((ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance "
                                 "delay."))
            elif (group.assignment_timestamp and
                  now - group.assignment_timestamp < self.setting(gid, "assignment.interval.ms")):
                statuses.append((ASSIGNMENT_DELAYED, "Assignment delayed due to the configured assignment "
                                 "interval."))
            else:
                self.compute_target(group, records, now)
        # Step 7. Reconcile.
        self._reconcile(group, member, req.active, records, now, force=new)
        # Step 8. The session; the answer.
        member.session_timeout_ms = self.setting(gid, "session.timeout.ms")
        member.session_deadline_ms = now + member.session_timeout_ms
        if req.shutdown_application:
            group.shutdown_requested = member.member_id
        if member.user_endpoint is not None and (set(member.active) != old_active or member.user_endpoint !=
                                                 old_endpoint):
            group.endpoint_information_epoch += 1
        return self._answer(group, member, req, joining or set(member.active) != old_active, statuses)

    def _answer(self, group: StreamsGroup, member: StreamsMember, req: HeartbeatRequest, send_tasks: bool,
                delayed: list) -> HeartbeatResult:
        statuses: list[tuple[int, str]] = []
        if group.topology is not None and member.topology_epoch < group.topology.epoch:
            statuses.append((STALE_TOPOLOGY, f"The member's topology epoch {member.topology_epoch} is behind the "
                             f"group's topology epoch {group.topology.epoch}."))
        statuses += delayed
        cfg = group.configured
        if cfg is not None:
            statuses += cfg.statuses
        if group.shutdown_requested:
            statuses.append((SHUTDOWN_APPLICATION, f"Streams group member {group.shutdown_requested} encountered a "
                             "fatal error and requested a shutdown for the entire application."))
        endpoints = None
        if req.endpoint_information_epoch != group.endpoint_information_epoch:
            endpoints = tuple(self._endpoint(group, m) for m in group.members.values() if m.user_endpoint is not None)
        to_create = cfg.to_create if cfg is not None and not cfg.ready else ()
        return HeartbeatResult(None, member.member_id, member.member_epoch,
                               self.setting(group.group_id, "heartbeat.interval.ms"), tuple(statuses),
                               frozenset(member.active) if send_tasks else None, group.endpoint_information_epoch,
                               endpoints, to_create)

    @staticmethod
    def _endpoint(group: StreamsGroup, m: StreamsMember):
        by_topic: dict[str, list[int]] = {}
        subs = {s.subtopology_id: s for s in group.topology.subtopologies} if group.topology else {}
        for sid, p in sorted(m.active):
            s = subs.get(sid)
            if s is None:
                continue
            for t in (*s.source_topics, *(x.name for x in s.repartition_source_topics)):
                by_topic.setdefault(t, []).append(p)
        return m.user_endpoint, by_topic

    def compute_target(self, group: StreamsGroup, records: list, now: int) -> None:
        """Step 6: the sticky assignor's target (empty while the topology is not ready)."""
        group.initial_delay_deadline_ms = None
        cfg = group.configured
        if cfg is not None and cfg.ready:
            target = assign({mid: MemberSpec(m.process_id, frozenset(m.active)) for mid, m in group.members.items()},
                            cfg.tasks)
        else:
            target = {mid: frozenset() for mid in group.members}
        for mid, tasks in target.items():
            if group.target.get(mid) != tasks:
                records.append(target_member_record(group.group_id, mid, tasks))
        group.target = target
        group.assignment_epoch, group.assignment_timestamp = group.group_epoch, now
        records.append(target_epoch_record(group))
        notice(log, "group %s: streams target assignment at epoch %d: %s", group.group_id, group.assignment_epoch,
               {mid: len(t) for mid, t in target.items()})

    def _reconcile(self, group: StreamsGroup, member: StreamsMember, owned, records: list, now: int,
                   force: bool = False) -> None:
        if member.is_reconciled_to(group.assignment_epoch) and not force:
            return
        owners = group.owners()
        mid = member.member_id
        nxt = next_assignment(member, group.assignment_epoch, group.target.get(mid, frozenset()),
                              lambda t: owners.get(t, mid) != mid, owned)
        if (nxt.state, nxt.member_epoch, nxt.active, nxt.pending_active) == (
                member.state, member.member_epoch, member.active, member.pending_active) and not force:
            return
        if nxt.member_epoch != member.member_epoch:
            member.previous_member_epoch = member.member_epoch
        member.state, member.member_epoch = nxt.state, nxt.member_epoch
        member.active, member.pending_active = nxt.active, nxt.pending_active
        records.append(current_assignment_record(group.group_id, member))
        member.rebalance_deadline_ms = (now + max(member.rebalance_timeout_ms, 0)
                                        if member.state == UNREVOKED_TASKS else None)

    # ------------------------------------------------------------------ leave and fencing

    def _leave(self, req: HeartbeatRequest, respond) -> None:
        group = self.groups.get(req.group_id)
        if not isinstance(group, StreamsGroup) or group.dead:
            missing = f"Group {req.group_id} not found." if group is None or group.is_dead() else \
                f"Group {req.group_id} is not a streams group."
            return respond(HeartbeatResult(errors.GroupIdNotFound(missing), req.member_id, req.member_epoch))
        member = group.members.get(req.member_id)
        if member is None:
            return respond(HeartbeatResult(errors.UnknownMemberId(
                f"Member {req.member_id} is not a member of group {req.group_id}."), req.member_id, req.member_epoch))
        before = group.snapshot()
        if req.shutdown_application:
            group.shutdown_requested = member.member_id
        records: list = []
        notice(log, "group %s: member %s left the streams group", group.group_id, member.member_id)
        self.remove_member(group, member, records, self.clock())
        self.write(group.group_id, group, before, records, HeartbeatResult(None, req.member_id, req.member_epoch),
                   respond)
        return None

    def remove_member(self, group: StreamsGroup, member: StreamsMember, records: list, now: int) -> None:
        """Kafka's streamsGroupFenceMember: tombstones, the group epoch bumped; the last member's
        leave also moves the assignment epoch to it."""
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        records += member_tombstones(group.group_id, member.member_id)
        group.group_epoch += 1
        records.append(group_epoch_record(group))
        if not group.members:
            group.assignment_epoch, group.assignment_timestamp, group.target = group.group_epoch, 0, {}
            group.shutdown_requested, group.initial_delay_deadline_ms = None, None
            group.state_timestamp_ms = now
            records.append(target_epoch_record(group))

    def _fence(self, group: StreamsGroup, member: StreamsMember, reason: str) -> None:
        notice(log, "group %s: streams member %s fenced because %s", group.group_id, member.member_id, reason)
        before = group.snapshot()
        records: list = []
        self.remove_member(group, member, records, self.clock())
        self.write(group.group_id, group, before, records, None, None)

    # ------------------------------------------------------------------ writing

    def write(self, group_id: str, existing, before, records: list, result, respond) -> None:
        if not records:
            if respond is not None:
                respond(result)
            return

        def stored(err: KafkaError | None) -> None:
            if err is not None:
                log.warning("group %s: streams records not written (%s); the group is put back", group_id, err)
                self._put_back(group_id, existing, before)
                if respond is not None:
                    respond(HeartbeatResult(err, result.member_id, result.member_epoch))
                return
            if respond is not None:
                respond(result)

        self.persist(group_id, records, stored)

    def _put_back(self, group_id: str, existing, before) -> None:
        if isinstance(existing, StreamsGroup):
            existing.restore_from(before)
        if existing is None:
            if isinstance(self.groups.get(group_id), StreamsGroup):
                self.groups.pop(group_id, None)
            return
        self.groups[group_id] = existing

    # ------------------------------------------------------------------ timers

    def _streams_groups(self) -> list[StreamsGroup]:
        return [g for g in self.groups.values() if isinstance(g, StreamsGroup) and not g.dead]

    def tick(self) -> None:
        """Session and rebalance timeouts; a new group's delayed first assignment."""
        now = self.clock()
        for group in self._streams_groups():
            for member in list(group.members.values()):
                if member.session_deadline_ms <= now:
                    self._fence(group, member, f"the member session expired ({member.session_timeout_ms} ms)")
                elif (member.rebalance_deadline_ms is not None and member.rebalance_deadline_ms <= now
                      and member.state == UNREVOKED_TASKS):
                    self._fence(group, member, f"it did not revoke its tasks at epoch {member.member_epoch} within "
                                f"its rebalance timeout ({member.rebalance_timeout_ms} ms)")
            deadline = group.initial_delay_deadline_ms
            if deadline is not None and deadline <= now and group.members and \
                    group.group_epoch > group.assignment_epoch:
                before, records = group.snapshot(), []
                self.compute_target(group, records, now)
                self.write(group.group_id, group, before, records, None, None)
            elif deadline is not None and deadline <= now:
                group.initial_delay_deadline_ms = None

    def next_deadline_ms(self) -> int | None:
        deadlines = []
        for g in self._streams_groups():
            if g.initial_delay_deadline_ms is not None:
                deadlines.append(g.initial_delay_deadline_ms)
            for m in g.members.values():
                deadlines.append(m.session_deadline_ms)
                if m.rebalance_deadline_ms is not None:
                    deadlines.append(m.rebalance_deadline_ms)
        return min(deadlines, default=None)

    # ------------------------------------------------------------------ offset commits

    @staticmethod
    def offset_commit(group: StreamsGroup, member_id: str, epoch: int, *, transactional: bool, api_version: int,
                      instance_id: str | None = None):
        """Kafka 4.4's StreamsGroup.validateOffsetCommit: raises what refuses the whole commit;
        None, or a check per partition (an older epoch: the task must be the member's, assigned
        at or before that epoch)."""
        if epoch < 0 and not group.members:
            return None
        if transactional and epoch == -1 and not member_id and instance_id is None:
            return None
        member = group.members.get(member_id)
        if member is None:
            raise errors.UnknownMemberId(f"Member {member_id} is not a member of group {group.group_id}.")
        if not transactional and api_version < 9:
            raise errors.UnsupportedVersion(
                "OffsetCommit version 9 or above must be used by members using the streams group protocol")
        if epoch == member.member_epoch:
            return None
        if epoch > member.member_epoch:
            raise errors.StaleMemberEpoch(
                f"Received member epoch {epoch} is newer than current member epoch {member.member_epoch}.")
        sources = group.topology.source_topic_map() if group.topology is not None else {}

        def check(topic: str, partition: int) -> KafkaError | None:
            sid = sources.get(topic)
            if sid is None:
                return errors.StaleMemberEpoch(f"Topic {topic} is not in the topology.")
            assigned_at = member.active.get((sid, partition), member.pending_active.get((sid, partition)))
            if assigned_at is None:
                return errors.StaleMemberEpoch(
                    f"Task {sid}-{partition} is not assigned or pending revocation for member.")
            if epoch < assigned_at:
                return errors.StaleMemberEpoch(
                    f"Received member epoch {epoch} is older than assignment epoch {assigned_at} for task "
                    f"{sid}-{partition}.")
            return None
        return check

    @staticmethod
    def offset_fetch(group: StreamsGroup, member_id: str | None, epoch: int) -> None:
        """StreamsGroup.validateOffsetFetch: an admin's (no member, epoch < 0) or the exact epoch."""
        if member_id is None and epoch < 0:
            return
        member = group.members.get(member_id or "")
        if member is None:
            raise errors.UnknownMemberId(f"Member {member_id} is not a member of group {group.group_id}.")
        if epoch != member.member_epoch:
            raise errors.StaleMemberEpoch(f"The received member epoch {epoch} does not match the expected member "
                                          f"epoch {member.member_epoch}.")

    # ------------------------------------------------------------------ replay

    def load(self, key, value) -> None:
        """Replay of one streams record (None: its tombstone)."""
        gid = key.group
        group = self.groups.get(gid)
        if not isinstance(group, StreamsGroup):
            if value is None:
                return
            group = self.groups[gid] = StreamsGroup(gid, self.clock(), group.offsets if group is not None else None)
        if isinstance(key, sr.StreamsGroupMetadataKey):
            if value is None:
                if not group.offsets:
                    self.groups.pop(gid, None)
                return
            group.group_epoch, group.metadata_hash = value.epoch, value.metadata_hash
            group.validated_topology_epoch = value.validated_topology_epoch
        elif isinstance(key, sr.StreamsGroupTopologyKey):
            group.topology, group.configured = value, None
        elif isinstance(key, sr.StreamsGroupTargetAssignmentMetadataKey):
            if value is not None:
                group.assignment_epoch, group.assignment_timestamp = value.assignment_epoch, value.assignment_timestamp
        elif isinstance(key, sr.StreamsGroupTargetAssignmentMemberKey):
            if value is None:
                group.target.pop(key.member_id, None)
            else:
                group.target[key.member_id] = value.active
        elif isinstance(key, sr.StreamsGroupMemberMetadataKey):
            if value is None:
                group.members.pop(key.member_id, None)
                return
            m = group.members.setdefault(key.member_id, StreamsMember(key.member_id))
            (m.instance_id, m.rack_id, m.client_id, m.client_host, m.rebalance_timeout_ms, m.topology_epoch,
             m.process_id, m.user_endpoint, m.client_tags) = (
                value.instance_id, value.rack_id, value.client_id, value.client_host, value.rebalance_timeout_ms,
                value.topology_epoch, value.process_id, value.user_endpoint, value.client_tags)
        elif isinstance(key, sr.StreamsGroupCurrentMemberAssignmentKey) and value is not None:
            m = group.members.setdefault(key.member_id, StreamsMember(key.member_id))
            m.member_epoch, m.previous_member_epoch, m.state = value.member_epoch, value.previous_member_epoch, \
                value.state if value.state in (1, 2, 3) else STABLE
            m.active, m.pending_active = dict(value.active), dict(value.pending_active or {})

    def finish_load(self) -> None:
        """After replay: every member's session starts now; members without metadata are dropped."""
        now = self.clock()
        for group in self._streams_groups():
            for mid, m in list(group.members.items()):
                if not m.process_id and not m.client_id and m.rebalance_timeout_ms == -1:
                    del group.members[mid]  # a current assignment whose member's metadata was deleted
                    continue
                m.session_timeout_ms = self.setting(group.group_id, "session.timeout.ms")
                m.session_deadline_ms = now + m.session_timeout_ms
                if m.state == UNREVOKED_TASKS:
                    m.rebalance_deadline_ms = now + max(m.rebalance_timeout_ms, 0)
