"""Streams groups (KIP-1071): the group, its members, their reconciliation, and the records of a
change. Pure: the coordinator (:mod:`.streams_coordinator`) drives it.

Group states (Kafka 4.4's StreamsGroup.maybeUpdateGroupState), evaluated in this order:

    Empty        no members
    NotReady     no topology, or its epoch is not the validated one (topics missing)
    Assigning    group epoch > assignment epoch
    Reconciling  some member not Stable at the assignment epoch
    Stable       otherwise
    Dead         deleted

Member states (persisted as Kafka's byte): STABLE=1, UNREVOKED_TASKS=2, UNRELEASED_TASKS=3.
Reconciliation (:func:`next_assignment`, Kafka's streams CurrentAssignmentBuilder), active
tasks, each with the epoch it was assigned at:

* STABLE at an older epoch than the target's, or UNRELEASED_TASKS: compute the next assignment;
* UNREVOKED_TASKS: wait until the member's heartbeat lists its owned tasks without those
  pending revocation, then compute the next assignment;
* next assignment: kept = current & target (old epochs); pending revocation = current - target;
  to assign = target - current, less the tasks another member still holds as active (assigned
  or pending revocation: "unreleased"). Revocation first (UNREVOKED_TASKS, epoch unchanged);
  else the new tasks at the target epoch (UNRELEASED_TASKS if some were held back, else STABLE).

So a task moves only after its old owner's heartbeat shows it let go, or the old owner is gone:
two instances never process one task at once (exactly-once's handover). Standby and warm-up
tasks are kept as empty sets (the assignor does not place standbys yet).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Callable

from . import streams_records as sr
from .records import encode_key
from .streams_topology import Configured, Topology

Task = tuple[str, int]
Record = tuple[bytes, "bytes | None"]

STABLE, UNREVOKED_TASKS, UNRELEASED_TASKS = 1, 2, 3
JOIN, LEAVE, LEAVE_STATIC = 0, -1, -2


class StreamsGroupState(enum.Enum):
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class StreamsMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = STABLE
    active: dict[Task, int] = field(default_factory=dict)  # task -> the epoch it was assigned at
    pending_active: dict[Task, int] = field(default_factory=dict)  # pending revocation
    task_offsets: dict[Task, int] = field(default_factory=dict)  # in memory only, as Kafka
    task_end_offsets: dict[Task, int] = field(default_factory=dict)
    session_deadline_ms: int = 0
    session_timeout_ms: int = 45000
    rebalance_deadline_ms: int | None = None

    def metadata(self) -> tuple:
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.rebalance_timeout_ms,
                self.topology_epoch, self.process_id, self.user_endpoint, self.client_tags)

    def assignment(self) -> tuple:
        return (self.member_epoch, self.previous_member_epoch, self.state, dict(self.active),
                dict(self.pending_active))

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state == STABLE and self.member_epoch == epoch

    def copy(self) -> "StreamsMember":
        return replace(self, active=dict(self.active), pending_active=dict(self.pending_active),
                       task_offsets=dict(self.task_offsets), task_end_offsets=dict(self.task_end_offsets))


class StreamsGroup:
    """Lives in the coordinator's one namespace of group ids beside classic and consumer groups
    (``group_type`` tells them apart); ``offsets`` are its committed offsets."""

    group_type = "streams"
    protocol_type = "streams"

    def __init__(self, group_id: str, now: int = 0, offsets: dict | None = None) -> None:
        self.group_id = group_id
        self.offsets: dict = offsets if offsets is not None else {}
        self.members: dict[str, StreamsMember] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: dict = {}  # the classic coordinator's leave and expiry read it (always empty)
        # A new group starts at epoch 1, and so does its (empty) target (Kafka 4.4's StreamsGroup and
        # TargetAssignmentMetadata.INITIAL): a joining member reconciles to epoch 1 at once.
        self.group_epoch = 1
        self.assignment_epoch = 1
        self.assignment_timestamp = 0
        self.metadata_hash = 0
        self.validated_topology_epoch = -1
        self.topology: Topology | None = None
        self.configured: Configured | None = None
        self.target: dict[str, frozenset[Task]] = {}
        self.state_timestamp_ms = now
        self.dead = False
        self.initial_delay_deadline_ms: int | None = None
        self.endpoint_information_epoch = 0
        self.shutdown_requested: str | None = None  # the member that asked

    # -- the shared interface of groups (ListGroups, DeleteGroups, offsets) --

    @property
    def state(self) -> StreamsGroupState:
        if self.dead:
            return StreamsGroupState.DEAD
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.topology is None or self.topology.epoch != self.validated_topology_epoch:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def is_dead(self) -> bool:
        return self.dead

    def supports(self, protocol_type, protocols) -> bool:
        return False  # a classic JoinGroup to a streams group's id: INCONSISTENT_GROUP_PROTOCOL

    def mark_dead(self, now_ms: int) -> None:
        self.dead = True
        self.state_timestamp_ms = now_ms

    def undelete(self) -> None:
        self.dead = False

    def next_deadline_ms(self) -> int | None:
        return None  # the streams coordinator keeps its own timers

    def tombstones(self) -> list[Record]:
        """Kafka's StreamsGroup.createGroupTombstoneRecords, in its order."""
        gid = self.group_id
        out: list[Record] = []
        out += [(encode_key(sr.StreamsGroupCurrentMemberAssignmentKey(gid, m)), None) for m in self.members]
        out += [(encode_key(sr.StreamsGroupTargetAssignmentMemberKey(gid, m)), None) for m in self.members]
        out.append((encode_key(sr.StreamsGroupTargetAssignmentMetadataKey(gid)), None))
        out += [(encode_key(sr.StreamsGroupMemberMetadataKey(gid, m)), None) for m in self.members]
        out.append((encode_key(sr.StreamsGroupMetadataKey(gid)), None))
        out.append((encode_key(sr.StreamsGroupTopologyKey(gid)), None))
        return out

    def owners(self) -> dict[Task, str]:
        """Every active task held by a member (assigned or pending revocation) -> that member."""
        out: dict[Task, str] = {}
        for m in self.members.values():
            for t in (*m.active, *m.pending_active):
                out[t] = m.member_id
        return out

    def snapshot(self) -> dict:
        snap = dict(vars(self))
        snap["members"] = {k: m.copy() for k, m in self.members.items()}
        snap["target"] = dict(self.target)
        snap["static_members"] = dict(self.static_members)
        return snap

    def restore_from(self, snap: dict) -> None:
        offsets = self.offsets
        self.__dict__.update(snap)
        self.offsets = offsets


# -- records of a change ------------------------------------------------------------------------

def _rec(key, value) -> Record:
    return encode_key(key), (sr.encode_streams_value(value) if value is not None else None)


def group_epoch_record(g: StreamsGroup) -> Record:
    return _rec(sr.StreamsGroupMetadataKey(g.group_id),
                sr.GroupMetadataValue(g.group_epoch, g.metadata_hash, g.validated_topology_epoch))


def member_metadata_record(gid: str, m: StreamsMember) -> Record:
    return _rec(sr.StreamsGroupMemberMetadataKey(gid, m.member_id), sr.MemberMetadataValue(*m.metadata()))


def target_member_record(gid: str, member_id: str, active: frozenset[Task]) -> Record:
    return _rec(sr.StreamsGroupTargetAssignmentMemberKey(gid, member_id), sr.TargetMemberValue(active))


def target_epoch_record(g: StreamsGroup) -> Record:
    return _rec(sr.StreamsGroupTargetAssignmentMetadataKey(g.group_id),
                sr.TargetMetadataValue(g.assignment_epoch, g.assignment_timestamp))


def current_assignment_record(gid: str, m: StreamsMember) -> Record:
    return _rec(sr.StreamsGroupCurrentMemberAssignmentKey(gid, m.member_id),
                sr.CurrentAssignmentValue(m.member_epoch, m.previous_member_epoch, m.state, dict(m.active),
                                          pending_active=dict(m.pending_active)))


def topology_record(g: StreamsGroup) -> Record:
    return _rec(sr.StreamsGroupTopologyKey(g.group_id), g.topology)


def member_tombstones(gid: str, member_id: str) -> list[Record]:
    return [(encode_key(sr.StreamsGroupCurrentMemberAssignmentKey(gid, member_id)), None),
            (encode_key(sr.StreamsGroupTargetAssignmentMemberKey(gid, member_id)), None),
            (encode_key(sr.StreamsGroupMemberMetadataKey(gid, member_id)), None)]


# -- reconciliation -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Next:
    state: int
    member_epoch: int
    active: dict[Task, int]
    pending_active: dict[Task, int]


def next_assignment(member: StreamsMember, target_epoch: int, target: frozenset[Task],
                    held_by_other: Callable[[Task], bool], owned: frozenset[Task] | None) -> Next:
    """One step of ``member`` towards ``target`` (Kafka's CurrentAssignmentBuilder.build).
    ``owned``: the active tasks the heartbeat says the member owns (None: not said)."""
    current = Next(member.state, member.member_epoch, dict(member.active), dict(member.pending_active))
    if member.state == STABLE:
        if member.member_epoch == target_epoch:
            return current
        return _compute(member, member.member_epoch, target_epoch, target, held_by_other, owned)
    if member.state == UNREVOKED_TASKS:
        if owned is None or owned & set(member.pending_active):
            return current
        return _compute(member, member.member_epoch, target_epoch, target, held_by_other, owned)
    return _compute(member, member.member_epoch, target_epoch, target, held_by_other, owned)


def _compute(member: StreamsMember, member_epoch: int, target_epoch: int, target: frozenset[Task],
             held_by_other: Callable[[Task], bool], owned: frozenset[Task] | None) -> Next:
    assigned = set(member.active)
    kept = {t: member.active[t] for t in assigned & target}
    revoke = {t: member.active[t] for t in assigned - target}
    to_assign = set(target) - assigned
    unreleased = {t for t in to_assign if held_by_other(t)}
    to_assign -= unreleased
    if revoke and (owned is None or owned & set(revoke)):
        return Next(UNREVOKED_TASKS, member_epoch, kept, revoke)
    active = dict(kept)
    active.update({t: target_epoch for t in to_assign})
    return Next(UNRELEASED_TASKS if unreleased else STABLE, target_epoch, active, {})
