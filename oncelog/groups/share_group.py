"""Share groups' membership (KIP-932): ShareGroupHeartbeat's join, heartbeat and leave, the
members' epochs and session timeouts, and the assignment (Kafka's GroupMetadataManager for share
groups, with its SimpleAssignor: :mod:`oncelog.groups.share_assignor`). Sans-IO and clock-free:
time comes from ``clock()`` (milliseconds), the broker calls :meth:`ShareGroups.tick` at
:meth:`ShareGroups.next_deadline_ms`.

What a share group is, beside the records it delivers (:mod:`oncelog.groups.share_partition`):
members that heartbeat, each subscribed to topics by name; the group's target assignment gives
each member partitions, where one partition may go to several members (more members than
partitions) and nothing is revoked member by member — the share partitions' acquisition locks,
not the assignment, keep two members from processing one record, and the broker does not check
the assignment on ShareFetch (as Kafka). So an assignment is handed out at once, whole.

Epochs (as Kafka's share groups):

* the **group epoch** is bumped when what the assignment depends on changes: a member joins or
  leaves, a subscription changes, a subscribed topic is created, deleted or gains partitions;
  the target assignment is then computed again;
* a **member epoch** is the group epoch of the assignment the member was last given. A heartbeat
  carries it: 0 joins (or joins again: a member that rejoins with its id gets a new epoch and the
  whole assignment), -1 leaves; a known epoch must be the member's current one or the one before
  it (the answer carrying the new one may have been lost); any other is FENCED_MEMBER_EPOCH. An
  unknown member id with an epoch other than 0 is UNKNOWN_MEMBER_ID (the member timed out or the
  coordinator restarted: it joins again with epoch 0).
* The answer's assignment is the member's whole assignment when it changed since the last one
  this member was sent (or it joined), else null (unchanged).

Group states (Kafka's ShareGroupState): Empty (no members), Stable (members); Dead once deleted.
Membership is not persisted (docs/share-groups.md: after a restart a member joins again, as after
its session expired); a group stays known while it has members or share state.

Bounds: members per group ``group.share.max.size`` (the broker's setting, default 200;
GROUP_MAX_SIZE_REACHED); a member that does not heartbeat within its session timeout
(``share.session.timeout.ms``, else the broker's ``group.share.session.timeout.ms``, 45 s) is
removed.
Nothing grows with what clients send beyond that: member ids are the clients' (a UUID each), and
a member removed is forgotten.
"""

from __future__ import annotations

import enum
import heapq
from dataclasses import dataclass, field
from typing import Callable, Mapping

from .. import errors
from .share_assignor import simple_assign

MAX_SIZE = 200  # group.share.max.size's default (Kafka's); the broker passes its setting
ASSIGNOR = "simple"


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class ShareMember:
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed: tuple[str, ...]  # topic names
    assignment: dict = field(default_factory=dict)  # topic id -> frozenset of partitions
    sent: dict | None = None  # the assignment last sent to this member (None: none yet)
    deadline_ms: int = 0
    queued: bool = False  # has its one entry in the coordinator's deadline heap


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict = field(default_factory=dict)  # member id -> ShareMember
    topology: tuple = ()  # (name, topic id, partitions) of the subscribed topics the assignment used
    target: dict = field(default_factory=dict)  # member id -> {topic id: partitions} at the assignment epoch
    dead: bool = False

    @property
    def state(self) -> ShareGroupState:
        if self.dead:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}


@dataclass(frozen=True)
class HeartbeatResult:
    error: errors.KafkaError | None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict | None = None  # topic id -> sorted partitions; None: unchanged


Settings = Callable[[str], Mapping[str, object]]  # group id -> its share settings in force


class ShareGroups:
    """Every share group this coordinator serves. ``topics()``: every topic now, name ->
    (topic id, partition count); ``settings(group_id)``: the group's share settings
    (:func:`oncelog.config.group_configs.share_settings`); ``other_type(group_id)``: the type of
    a classic or consumer group of that id, if there is one (one namespace of group ids)."""

    def __init__(self, clock: Callable[[], int], topics: Callable[[], Mapping[str, tuple]], settings: Settings,
                 other_type: Callable[[str], str | None] = lambda _g: None, max_size: int = MAX_SIZE) -> None:
        self.clock, self.topics, self.settings, self.other_type = clock, topics, settings, other_type
        self.max_size = max_size
        self.groups: dict[str, ShareGroup] = {}
        # (deadline, group, member): a heap with at most one entry per member (ShareMember.queued);
        # a member's later heartbeats move its deadline, and the entry is pushed again when it comes up.
        self._deadlines: list[tuple[int, str, str]] = []
        self._live = 0  # members in every group

    # ------------------------------------------------------------------ ShareGroupHeartbeat

    def heartbeat(self, *, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed_topic_names: tuple[str, ...] | None, client_id: str = "",
                  client_host: str = "") -> HeartbeatResult:
        try:
            self._check_request(group_id, member_id, member_epoch, rack_id, subscribed_topic_names)
            if self.other_type(group_id) is not None:
                raise errors.GroupIdNotFound(f"Group {group_id} is not a share group.")
            return self._heartbeat(group_id, member_id, member_epoch, rack_id, subscribed_topic_names,
                                   client_id, client_host)
        except errors.KafkaError as exc:
            return HeartbeatResult(exc)

    @staticmethod
    def _check_request(group_id, member_id, member_epoch, rack_id, subscribed) -> None:
        # Kafka's GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid, in its order.
        if not member_id:
            raise errors.InvalidRequest("MemberId can't be empty.")
        if not group_id:
            raise errors.InvalidRequest("GroupId can't be empty.")
        if rack_id is not None and not rack_id:
            raise errors.InvalidRequest("RackId can't be empty.")
        if member_epoch == 0 and not subscribed:
            raise errors.InvalidRequest("SubscribedTopicNames must be set in first request.")
        if member_epoch < -1:
            raise errors.InvalidRequest("MemberEpoch is invalid.")

    def _heartbeat(self, group_id, member_id, member_epoch, rack_id, subscribed, client_id, client_host):
        now = self.clock()
        settings = self.settings(group_id)
        interval = int(settings["share.heartbeat.interval.ms"])
        group = self.groups.get(group_id)
        if member_epoch == -1:
            # A group this broker does not have (membership is not persisted: after a restart) —
            # the leave succeeds; a member the group does not have: UNKNOWN_MEMBER_ID, as Kafka 4.4.
            if group is not None and not group.dead:
                if member_id not in group.members:
                    raise errors.UnknownMemberId(f"Member {member_id} is not a member of group {group_id}.")
                self._remove(group, member_id)
            return HeartbeatResult(None, member_id, -1, 0)
        if group is None or group.dead:
            # Kafka answers GROUP_ID_NOT_FOUND; here it is also what a member sees after a restart
            # (membership is not persisted), and UNKNOWN_MEMBER_ID is what makes it rejoin.
            if member_epoch != 0:
                raise errors.UnknownMemberId(f"Member {member_id} is not a member of group {group_id}.")
            group = self.groups[group_id] = ShareGroup(group_id)
        member = group.members.get(member_id)
        changed = False
        if member is None:
            if member_epoch != 0:
                raise errors.UnknownMemberId(f"Member {member_id} is not a member of group {group_id}.")
            if len(group.members) >= self.max_size:
                raise errors.GroupMaxSizeReached(
                    f"The share group {group_id} has reached its maximum capacity of {self.max_size} members.")
            member = group.members[member_id] = ShareMember(member_id, 0, 0, client_id, client_host, rack_id,
                                                            tuple(subscribed))
            self._live += 1
            changed = True
        elif member_epoch == 0:  # joins again with its id: a new epoch, the whole assignment
            member.sent = None
        elif member_epoch != member.member_epoch and member_epoch != member.previous_member_epoch:
            if member_epoch > member.member_epoch:
                raise errors.FencedMemberEpoch(
                    f"The share group member has a greater member epoch ({member_epoch}) than the one known by "
                    f"the group coordinator ({member.member_epoch}). The member must abandon all its partitions "
                    "and rejoin.")
            raise errors.FencedMemberEpoch(  # Kafka 4.4's words (GroupMetadataManager)
                f"The share group member has a smaller member epoch ({member_epoch}) than the one known by the "
                f"group coordinator ({member.member_epoch}), and it does not match the previous member epoch "
                f"({member.previous_member_epoch}). The member must abandon all its partitions and rejoin.")
        if subscribed is not None and tuple(subscribed) != member.subscribed:
            member.subscribed = tuple(subscribed)
            changed = True
        member.client_id, member.client_host, member.rack_id = client_id, client_host, rack_id
        topology = self._topology(group)
        if changed or topology != group.topology:
            self._assign(group, topology)
        self._reconcile(group, member)
        member.deadline_ms = now + int(settings["share.session.timeout.ms"])
        if not member.queued:
            member.queued = True
            heapq.heappush(self._deadlines, (member.deadline_ms, group_id, member_id))
        assignment = None
        if member.sent != member.assignment:
            member.sent = dict(member.assignment)
            assignment = {tid: sorted(ps) for tid, ps in member.assignment.items()}
        return HeartbeatResult(None, member_id, member.member_epoch, interval, assignment)

    def _topology(self, group: ShareGroup) -> tuple:
        topics = self.topics()
        return tuple(sorted((name, topics[name][0], topics[name][1]) for name in group.subscribed_topics()
                            if name in topics))

    def _assign(self, group: ShareGroup, topology: tuple) -> None:
        """A new group epoch: the target assignment computed again (sticky), every member given it."""
        group.group_epoch += 1
        group.topology = topology
        ids = {name: tid for name, tid, _n in topology}
        counts = {name: n for name, _tid, n in topology}
        by_name = {tid: name for name, tid in ids.items()}
        current = {mid: {by_name[tid]: set(ps) for tid, ps in group.target.get(mid, {}).items() if tid in by_name}
                   for mid in group.members}
        target = simple_assign({mid: set(m.subscribed) & set(counts) for mid, m in group.members.items()},
                               counts, current)
        group.assignment_epoch = group.group_epoch
        group.target = {mid: {ids[name]: frozenset(ps) for name, ps in target.get(mid, {}).items() if ps}
                        for mid in group.members}

    @staticmethod
    def _reconcile(group: ShareGroup, member: ShareMember) -> None:
        """The member takes the target assignment and its epoch, at its own heartbeat (as Kafka
        updates a member's record only then: its epoch stays what it was last told until it asks)."""
        if member.member_epoch != group.assignment_epoch:
            member.previous_member_epoch, member.member_epoch = member.member_epoch, group.assignment_epoch
        member.assignment = group.target.get(member.member_id, {})

    def _remove(self, group: ShareGroup, member_id: str) -> None:
        del group.members[member_id]
        self._assign(group, self._topology(group))
        # A member gone leaves its heap entry until it comes up; members leaving and joining in a
        # loop must not grow the heap: rebuilt from the live members once stale entries dominate.
        self._live -= 1
        if len(self._deadlines) > 2 * self._live + 64:
            self._deadlines = []
            for g in self.groups.values():
                for m in g.members.values():
                    m.queued = True
                    self._deadlines.append((m.deadline_ms, g.group_id, m.member_id))
            heapq.heapify(self._deadlines)

    # ------------------------------------------------------------------ timers

    def tick(self) -> list[tuple[str, str]]:
        """Remove the members whose session expired; the (group, member) removed."""
        now = self.clock()
        removed = []
        while (entry := self._next_entry()) is not None and entry[0] <= now:
            heapq.heappop(self._deadlines)
            _deadline, group_id, member_id = entry
            group = self.groups[group_id]
            group.members[member_id].queued = False
            self._remove(group, member_id)
            removed.append((group_id, member_id))
        return removed

    def next_deadline_ms(self) -> int | None:
        entry = self._next_entry()
        return None if entry is None else entry[0]

    def _next_entry(self) -> tuple[int, str, str] | None:
        """The heap's head once it is current: an entry of a member gone is dropped, one of a
        member that heartbeat since is pushed again at its new deadline."""
        while self._deadlines:
            deadline, group_id, member_id = self._deadlines[0]
            group = self.groups.get(group_id)
            member = group.members.get(member_id) if group is not None else None
            if member is None:
                heapq.heappop(self._deadlines)
            elif member.deadline_ms != deadline:
                heapq.heapreplace(self._deadlines, (member.deadline_ms, group_id, member_id))
            else:
                return self._deadlines[0]
        return None

    # ------------------------------------------------------------------ admin

    def get(self, group_id: str) -> ShareGroup | None:
        group = self.groups.get(group_id)
        return None if group is None or group.dead else group

    def delete(self, group_id: str) -> None:
        """DeleteGroups of a share group: only an empty one (NON_EMPTY_GROUP otherwise)."""
        group = self.get(group_id)
        if group is None:
            raise errors.GroupIdNotFound(f"Group {group_id} not found.")
        if group.members:
            raise errors.NonEmptyGroup(f"Group {group_id} is not empty.")
        del self.groups[group_id]
