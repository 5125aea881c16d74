"""A KIP-848 consumer group's state: its members, its target assignment, and the reconciliation
state machine that moves each member from its current assignment to its target (Kafka's
ConsumerGroup, ConsumerGroupMember and CurrentAssignmentBuilder). Sans-IO and clock-free: the
coordinator (:mod:`oncelog.groups.consumer_coordinator`) drives it.

Epochs (KIP-848):

* the **group epoch** is bumped when what the assignment depends on changes: a member joins or
  leaves, a subscription changes, a subscribed topic's partitions change;
* the **assignment epoch** is the group epoch the target assignment was computed at;
* a **member epoch** is the epoch of the assignment the member was last given; it fences
  zombies: heartbeats and offset commits carry it and must match.

A partition has at most one owner at a time: a member owns the partitions of its assignment and
those it has been asked to revoke but not yet acknowledged (``partitions_pending_revocation``).
:meth:`ConsumerGroup.partition_epochs` maps each owned partition to its owner's epoch; a
partition the target gives to another member is handed over only once it is free
(``UNRELEASED_PARTITIONS`` until then).

Member reconciliation (:func:`next_member_state`, Kafka's CurrentAssignmentBuilder); each arrow
is a :class:`MemberEvent`, and :data:`MEMBER_TRANSITIONS` is the same graph as a table read by
:meth:`ConsumerMember.transition`, the one way a member's state changes::

               UNRELEASED: target epoch > member epoch,
                 nothing to revoke, a new one not free
    +--------+ -------------------------------->  +------------------------+
    | STABLE |                                    | UNRELEASED_PARTITIONS  |  a new partition is
    +--------+  <------------------------------   +------------------------+  still owned elsewhere
      |    ^     RECONCILED: every new one free        |        ^
      |    |                                    REVOKE |        | UNRELEASED: owned ones revoked,
      |    | RECONCILED: revoked (member epoch + 1,    v        | some new ones not free
      |    | then towards the target)           +----------------------+
      +----|----------------------------------> | UNREVOKED_PARTITIONS |  waits for the member to
           +----------------------------------- +----------------------+  stop owning what it lost
              REVOKE: a partition the target takes away
              (RECONCILED from STABLE to STABLE: a new epoch, every new partition free)

While revoking, the member stays at its epoch (its new epoch is only given once it has
acknowledged the revocation, so a commit of a revoked partition can't pass); the revocation must
happen within its rebalance timeout or the member is fenced (removed). From any state, a member
that joins again with epoch 0 (``REJOIN``, KIP-1082) owns nothing and is STABLE at epoch 0; UNKNOWN
(a newer coordinator's state, read at replay) is left by the first step, never entered. Replay
restores the state a record says (:meth:`ConsumerMember.restore_from`): not a transition.

Group states (Kafka's ConsumerGroupState), derived, never set: Empty (no members), Assigning (the
group epoch is ahead of the assignment epoch), Reconciling (some member is not yet STABLE at the
assignment epoch), Stable; Dead once deleted. One heartbeat, leave or timer may move a live group
from any live state to any other (a member joining an Empty group may be assigned and reconciled
at once; the last member's leave empties a group in any state), but only an Empty group is
deleted (Dead), and Dead is final (a deletion whose records were not written is reverted by
:meth:`ConsumerGroup.undelete`, not a transition). :data:`GROUP_TRANSITIONS` says so and is
checked on every change (:meth:`ConsumerGroup.update_state`).
"""

from __future__ import annotations

import base64
import copy
import enum
import uuid
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..state_machine import KafkaState, check_transition, next_state
from . import consumer_records as cr
from .records import OffsetValue, encode_key

TopicId = uuid.UUID
Partitions = dict[TopicId, frozenset[int]]

# Member epochs a heartbeat may carry besides a real one (KIP-848).
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """A member's reconciliation state; the values are Kafka's (the int8 of the
    ConsumerGroupCurrentMemberAssignment record)."""
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @property
    def kafka_name(self) -> str:
        return self.name.lower()


class ConsumerGroupState(KafkaState, enum.Enum):
    # The value is Kafka's name (ConsumerGroupDescribe answers it), as kafka_name derives it.
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberEvent(enum.Enum):
    """What a reconciliation step (or a rejoin) finds for a member; the value names it in errors."""
    # The target takes away partitions the member still owns: it must revoke them first.
    REVOKE = "partitions to revoke"
    # Nothing to revoke, but a partition of the target is still owned by another member.
    UNRELEASED = "partitions not yet released"
    # Nothing to revoke, every partition of the target is free: the member has it all.
    RECONCILED = "reconciled"
    # The member joined again with epoch 0 (KIP-1082): it gave up every partition.
    REJOIN = "rejoin with epoch 0"


M, C, ME = MemberState, ConsumerGroupState, MemberEvent
# Every reconciliation outcome of Kafka's CurrentAssignmentBuilder, by event. A member in
# UNKNOWN is reconciled only if it owns nothing (else it is fenced), so it has nothing to revoke.
MEMBER_TRANSITIONS: dict[MemberState, dict[MemberEvent, MemberState]] = {
    M.STABLE: {ME.REVOKE: M.UNREVOKED_PARTITIONS, ME.UNRELEASED: M.UNRELEASED_PARTITIONS,
               ME.RECONCILED: M.STABLE, ME.REJOIN: M.STABLE},
    M.UNREVOKED_PARTITIONS: {ME.REVOKE: M.UNREVOKED_PARTITIONS, ME.UNRELEASED: M.UNRELEASED_PARTITIONS,
                             ME.RECONCILED: M.STABLE, ME.REJOIN: M.STABLE},
    M.UNRELEASED_PARTITIONS: {ME.REVOKE: M.UNREVOKED_PARTITIONS, ME.UNRELEASED: M.UNRELEASED_PARTITIONS,
                              ME.RECONCILED: M.STABLE, ME.REJOIN: M.STABLE},
    M.UNKNOWN: {ME.UNRELEASED: M.UNRELEASED_PARTITIONS, ME.RECONCILED: M.STABLE, ME.REJOIN: M.STABLE},
}
# The derived group state (:meth:`ConsumerGroup.update_state`): within the live states any move
# happens (see the module's docstring); Dead only from Empty (DeleteGroups, offset expiry).
_LIVE = frozenset({C.EMPTY, C.ASSIGNING, C.RECONCILING, C.STABLE})
GROUP_TRANSITIONS: dict[ConsumerGroupState, frozenset[ConsumerGroupState]] = {
    C.EMPTY: (_LIVE - {C.EMPTY}) | {C.DEAD},
    C.ASSIGNING: _LIVE - {C.ASSIGNING},
    C.RECONCILING: _LIVE - {C.RECONCILING},
    C.STABLE: _LIVE - {C.STABLE},
    C.DEAD: frozenset(),
}


def freeze(partitions: Mapping[TopicId, object]) -> Partitions:
    """A partitions map with frozensets and no empty topics (the form every comparison uses)."""
    return {t: frozenset(ps) for t, ps in partitions.items() if ps}


def partition_count(partitions: Partitions) -> int:
    return sum(len(ps) for ps in partitions.values())


@dataclass
class ConsumerMember:
    """A member of a consumer group (Kafka's ConsumerGroupMember): what it subscribes to (its
    ConsumerGroupMemberMetadata record) and where it stands in reconciliation (its
    ConsumerGroupCurrentMemberAssignment record)."""
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    # Each owned partition (assigned or being revoked) -> the member epoch it was assigned at
    # (Kafka 4.4, KIP-1251): an offset commit at an older member epoch is accepted for a
    # partition it has owned since then.
    partition_epochs: dict[tuple[TopicId, int], int] = field(default_factory=dict)
    # A member that joined with the classic protocol (JoinGroup): its session timeout and
    # protocols (ConsumerGroupMemberMetadataValue.classic_member_metadata); None otherwise.
    classic: "cr.ClassicMemberMetadata | None" = None
    # Timers (not stored): the session deadline; the deadline to revoke by (UNREVOKED_PARTITIONS).
    session_deadline_ms: int = 0
    rebalance_deadline_ms: int | None = None

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch

    def subscription(self) -> tuple:
        """What the group epoch depends on (a change of it bumps the group epoch)."""
        return self.subscribed_topic_names, self.subscribed_topic_regex

    def metadata(self) -> tuple:
        """The fields of its ConsumerGroupMemberMetadata record (a change is written)."""
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names,
                self.subscribed_topic_regex, self.rebalance_timeout_ms, self.server_assignor, self.classic)

    def assignment_state(self) -> tuple:
        """The fields of its ConsumerGroupCurrentMemberAssignment record."""
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned, self.pending_revocation,
                self.partition_epochs)

    def update_member_epoch(self, epoch: int) -> None:
        """Kafka's ConsumerGroupMember.Builder.updateMemberEpoch: the previous epoch is the one
        before this update, even when the epoch stays (a member entering revocation)."""
        self.previous_member_epoch, self.member_epoch = self.member_epoch, epoch

    def transition(self, event: MemberEvent) -> MemberState:
        """Move as :data:`MEMBER_TRANSITIONS` says for ``event`` (the one way a member's state
        changes); raises :class:`~oncelog.state_machine.IllegalStateTransition`, the member
        unchanged, if the table has no such move."""
        self.state = next_state(MEMBER_TRANSITIONS, f"member {self.member_id!r}", self.state, event)
        return self.state

    def apply(self, step: "Reconciled") -> None:
        """Take a reconciliation step (:func:`next_member_state`)."""
        self.transition(step.event)
        self.update_member_epoch(step.member_epoch)
        self.assigned, self.pending_revocation = step.assigned, step.pending_revocation
        self.partition_epochs = dict(step.partition_epochs)

    def rejoin(self) -> None:
        """It joined again with epoch 0 (KIP-1082): it owns nothing, at epoch 0, STABLE."""
        self.transition(ME.REJOIN)
        self.member_epoch = self.previous_member_epoch = 0
        self.assigned, self.pending_revocation, self.partition_epochs = {}, {}, {}
        self.rebalance_deadline_ms = None

    def restore_from(self, value: "cr.ConsumerGroupCurrentMemberAssignmentValue") -> None:
        """Replay: where its ConsumerGroupCurrentMemberAssignment record left it. Not a
        transition: the record's state, whatever it was (UNKNOWN for a state byte this
        coordinator does not know)."""
        self.member_epoch, self.previous_member_epoch = value.member_epoch, value.previous_member_epoch
        try:
            self.state = MemberState(value.state)
        except ValueError:
            self.state = MemberState.UNKNOWN
        self.assigned = freeze(value.assigned_partitions)
        self.pending_revocation = freeze(value.partitions_pending_revocation)
        # A partition without its epoch (written before Kafka 4.4) counts from the member's.
        default = max(self.member_epoch, 0)
        self.partition_epochs = {
            (t, p): epochs.get(t, {}).get(p, default)
            for parts, epochs in ((self.assigned, value.assigned_epochs),
                                  (self.pending_revocation, value.pending_revocation_epochs))
            for t, ps in parts.items() for p in ps}


@dataclass
class ConsumerGroup:
    """A KIP-848 group. Shares the coordinator's group namespace (and offsets' shape) with the
    classic :class:`~oncelog.groups.state.Group`: ``group_type`` tells them apart."""
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Partitions] = field(default_factory=dict)  # member id -> target assignment
    offsets: dict[tuple[str, int], OffsetValue] = field(default_factory=dict)
    # What the target assignment was computed from: subscribed topics' (id, partitions), and
    # its digest (ConsumerGroupMetadataValue.metadata_hash); a change bumps the group epoch.
    subscription_metadata: dict[str, tuple[TopicId, int]] = field(default_factory=dict)
    metadata_hash: int = 0
    # The members' regexes as last resolved (Kafka's resolvedRegularExpressions, records of type
    # 16): regex -> the names of the topics it matched that the principal of the member whose
    # heartbeat resolved it may DESCRIBE. A regex without an entry is unresolved (it subscribes
    # to nothing yet). Replaced, never changed in place, so a snapshot keeps the old mapping.
    resolved_regexes: dict[str, frozenset[str]] = field(default_factory=dict)
    # When the regexes were last resolved, and the topic names that existed then (not stored:
    # None until the first resolution since the broker started, which resolves them again). A
    # topic created since, or Kafka's refresh interval past, resolves them again.
    regexes_resolved_ms: int | None = None
    regexes_resolved_against: frozenset[str] | None = None
    state_timestamp_ms: int = 0
    # Assignment batching (KIP-1263, not stored): when the target was last computed (None: not
    # since the broker started); the next waits group.consumer.assignment.interval.ms from then.
    last_assignment_ms: int | None = None
    dead: bool = False
    _state: ConsumerGroupState = ConsumerGroupState.EMPTY

    group_type = "consumer"
    protocol_type = "consumer"
    pending_members: dict = field(default_factory=dict)  # classic-only; always empty here

    # -------------------------------------------------------------- state

    @property
    def state(self) -> ConsumerGroupState:
        return self._state

    def update_state(self, now_ms: int) -> None:
        """Recompute the derived state (Kafka's maybeUpdateGroupState) and check the change."""
        if self.dead:
            new = C.DEAD
        elif not self.members:
            new = C.EMPTY
        elif self.group_epoch > self.assignment_epoch:
            new = C.ASSIGNING
        elif any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            new = C.RECONCILING
        else:
            new = C.STABLE
        if new is not self._state:
            check_transition(GROUP_TRANSITIONS, f"consumer group {self.group_id!r}", self._state, new)
            self._state = new
            self.state_timestamp_ms = now_ms

    def subscriptions(self) -> tuple[frozenset[str], frozenset[str]]:
        """Every topic name and every regex some member subscribes to; cached until
        :meth:`subscriptions_changed` (a heartbeat of an unchanged group does no O(members) work)."""
        cached = self.__dict__.get("_subscriptions")
        if cached is None:
            names = frozenset(t for m in self.members.values() for t in m.subscribed_topic_names)
            regexes = frozenset(m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex)
            cached = self.__dict__["_subscriptions"] = (names, regexes)
        return cached

    def subscriptions_changed(self) -> None:
        self.__dict__["_subscriptions"] = None

    def is_empty(self) -> bool:
        return not self.members and not self.dead

    def is_dead(self) -> bool:
        return self.dead

    def mark_dead(self, now_ms: int) -> None:
        self.dead = True
        self.update_state(now_ms)

    def undelete(self) -> None:
        """Back to Empty: its deletion's records were not written. A revert, not a transition."""
        self.dead = False
        self._state = C.EMPTY

    # -------------------------------------------------------------- ownership

    def partition_epochs(self) -> dict[tuple[TopicId, int], int]:
        """Who owns what now: each partition assigned to or being revoked by a member -> that
        member's epoch (Kafka's currentPartitionEpoch; -1, absent here, is free)."""
        owned: dict[tuple[TopicId, int], int] = {}
        for m in self.members.values():
            for parts in (m.assigned, m.pending_revocation):
                for t, ps in parts.items():
                    for p in ps:
                        owned[(t, p)] = m.member_epoch
        return owned

    def subscribed_topics(self) -> set[str]:
        """Topic names some member subscribes to (by name or through its regex, as resolved into
        ``subscription_metadata``): offsets of these can't be deleted while it has members."""
        names = {t for m in self.members.values() for t in m.subscribed_topic_names}
        return names | set(self.subscription_metadata)

    def tombstones(self) -> list[tuple[bytes, bytes | None]]:
        """Every record of the group, deleted (Kafka's createGroupTombstoneRecords; the group
        epoch's record last: replay forgets the group there). Offsets are records of their own."""
        gid = self.group_id
        out = [r for mid in self.members for r in member_tombstones(gid, mid)]
        out.append((encode_key(cr.ConsumerGroupTargetAssignmentMetadataKey(gid)), None))
        out += [(encode_key(cr.ConsumerGroupRegularExpressionKey(gid, regex)), None)
                for regex in self.resolved_regexes]
        out.append((encode_key(cr.ConsumerGroupMetadataKey(gid)), None))
        return out

    def snapshot(self) -> "GroupSnapshot":
        """What a change may touch, kept to put back if its records are not written; members
        about to change are copied as they are touched (:meth:`touch`). O(members) dict copies,
        no deep copy: a heartbeat of a large group stays cheap."""
        self.undo = GroupSnapshot(self)
        return self.undo

    def touch(self, member: ConsumerMember) -> None:
        """``member`` is about to change: keep a copy in the running change's snapshot."""
        undo = getattr(self, "undo", None)
        if undo is not None:
            undo.touch(member)

    def restore_from(self, snap: "GroupSnapshot") -> None:
        snap.restore(self)


class GroupSnapshot:
    """A consumer group before a change. Members are changed by assigning their fields, never
    their maps in place, so a shallow copy of each touched member restores it."""

    _MAPS = ("members", "static_members", "target", "subscription_metadata")

    def __init__(self, group: ConsumerGroup) -> None:
        self.fields = {k: v for k, v in group.__dict__.items() if k not in self._MAPS + ("offsets", "undo")}
        self.maps = {k: dict(getattr(group, k)) for k in self._MAPS}
        self.members: dict[int, tuple[ConsumerMember, ConsumerMember]] = {}

    def touch(self, member: ConsumerMember) -> None:
        self.members.setdefault(id(member), (member, copy.copy(member)))

    def restore(self, group: ConsumerGroup) -> None:
        group.__dict__.update(self.fields)
        for k, v in self.maps.items():
            setattr(group, k, dict(v))
        for member, saved in self.members.values():
            member.__dict__.update(saved.__dict__)


def new_group(group_id: str, now: int, offsets=None) -> ConsumerGroup:
    """A new group at epoch 1 with an empty target assignment at epoch 1, as Kafka 4.4 makes them
    (KAFKA-20268): the first computed assignment is epoch 2, and a member joining reconciles
    towards epoch 1 meanwhile."""
    return ConsumerGroup(group_id, group_epoch=1, assignment_epoch=1, offsets={} if offsets is None else offsets,
                         state_timestamp_ms=now)


def new_member_id() -> str:
    """A member id as Kafka makes them (Uuid.randomUuid().toString(): 22 URL-safe base64 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def member_tombstones(group_id: str, member_id: str) -> list[tuple[bytes, bytes | None]]:
    """A member's records, deleted, in Kafka's order: current assignment, target, subscription."""
    return [(encode_key(cr.ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id)), None),
            (encode_key(cr.ConsumerGroupTargetAssignmentMemberKey(group_id, member_id)), None),
            (encode_key(cr.ConsumerGroupMemberMetadataKey(group_id, member_id)), None)]


# ---------------------------------------------------------------- records of a change
# Each change of a group is written as Kafka's records (:mod:`oncelog.groups.consumer_records`);
# these build them from the state they record.

Record = tuple[bytes, bytes | None]


def cr_record(key, value) -> Record:
    return encode_key(key), cr.encode_consumer_value(value)


def member_metadata_record(gid: str, m: ConsumerMember) -> Record:
    """Its subscription and metadata (ConsumerGroupMemberMetadata)."""
    return cr_record(cr.ConsumerGroupMemberMetadataKey(gid, m.member_id), cr.ConsumerGroupMemberMetadataValue(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=m.subscribed_topic_names, subscribed_topic_regex=m.subscribed_topic_regex or "",
        rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
        classic_member_metadata=m.classic))


def current_assignment_record(gid: str, m: ConsumerMember) -> Record:
    """Where it stands in reconciliation (ConsumerGroupCurrentMemberAssignment)."""
    return cr_record(cr.ConsumerGroupCurrentMemberAssignmentKey(gid, m.member_id),
                     cr.ConsumerGroupCurrentMemberAssignmentValue(
                         member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
                         state=int(m.state), assigned_partitions=m.assigned,
                         partitions_pending_revocation=m.pending_revocation,
                         assigned_epochs=_epochs(m.assigned, m.partition_epochs, m.member_epoch),
                         pending_revocation_epochs=_epochs(m.pending_revocation, m.partition_epochs,
                                                           m.member_epoch)))


def group_epoch_record(group: ConsumerGroup) -> Record:
    """The group epoch and the digest of what it was computed from (ConsumerGroupMetadata)."""
    return cr_record(cr.ConsumerGroupMetadataKey(group.group_id),
                     cr.ConsumerGroupMetadataValue(group.group_epoch, group.metadata_hash))


def target_member_record(gid: str, member_id: str, target: Partitions) -> Record:
    """A member's target assignment (ConsumerGroupTargetAssignmentMember)."""
    return cr_record(cr.ConsumerGroupTargetAssignmentMemberKey(gid, member_id),
                     cr.ConsumerGroupTargetAssignmentMemberValue(target))


def target_epoch_record(gid: str, assignment_epoch: int, *timestamp: int) -> Record:
    """The epoch the target assignment was computed at (ConsumerGroupTargetAssignmentMetadata),
    with when, if given."""
    return cr_record(cr.ConsumerGroupTargetAssignmentMetadataKey(gid),
                     cr.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch, *timestamp))


def _epochs(parts: Partitions, epochs: Mapping[tuple[TopicId, int], int], member_epoch: int) -> dict:
    """Per-partition assignment epochs as the record holds them: topic -> {partition: epoch}."""
    out: dict[TopicId, dict[int, int]] = {}
    for t, ps in parts.items():
        out[t] = {p: epochs.get((t, p), max(member_epoch, 0)) for p in sorted(ps)}
    return out


@dataclass(frozen=True)
class Reconciled:
    """The outcome of one reconciliation step for a member (Kafka's CurrentAssignmentBuilder)."""
    state: MemberState
    member_epoch: int
    assigned: Partitions
    pending_revocation: Partitions
    partition_epochs: dict = field(default_factory=dict, compare=False)
    # What the step found (None: no step, the member stays as it is).
    event: MemberEvent | None = field(default=None, compare=False)


class FencedMemberEpochError(Exception):
    """The member is in a state this coordinator can't reconcile (UNKNOWN while owning
    partitions): it must give up its partitions and rejoin (FENCED_MEMBER_EPOCH)."""


def next_member_state(member: ConsumerMember, target_epoch: int, target: Partitions,
                      owner_epoch: Callable[[TopicId, int], int],
                      owned: Partitions | None) -> Reconciled:
    """One step of reconciliation of ``member`` towards ``target`` (computed at ``target_epoch``).

    ``owner_epoch(topic, partition)``: the epoch of the partition's current owner, -1 if free.
    ``owned``: the partitions the member reports owning in this heartbeat, or None if it did not
    say (then it is assumed to still own what it was asked to revoke). Pure: returns the new state.
    """
    current = Reconciled(member.state, member.member_epoch, member.assigned, member.pending_revocation,
                         member.partition_epochs)
    if member.state is M.STABLE:
        if member.member_epoch != target_epoch:
            return _compute_next(member, member.member_epoch, member.assigned, target_epoch, target, owner_epoch, owned)
        return current
    if member.state is M.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return current
        # Revoked: on to the next epoch, reconciling towards the latest target.
        return _compute_next(member, min(member.member_epoch + 1, target_epoch), member.assigned, target_epoch,
                             target, owner_epoch, owned)
    if member.state is M.UNRELEASED_PARTITIONS:
        return _compute_next(member, member.member_epoch, member.assigned, target_epoch, target, owner_epoch, owned)
    # UNKNOWN: only a newer coordinator writes it; start over if the member owns nothing.
    if owned is None or partition_count(owned) > 0:
        raise FencedMemberEpochError("the member is in an unknown state: it must give up its partitions and rejoin")
    return _compute_next(member, target_epoch, member.assigned, target_epoch, target, owner_epoch, owned)


def _owns_any(owned: Partitions | None, partitions: Partitions) -> bool:
    if owned is None:
        return True
    return any(ps & owned.get(t, frozenset()) for t, ps in partitions.items())


def _compute_next(member: ConsumerMember, member_epoch: int, assigned: Partitions, target_epoch: int,
                  target: Partitions, owner_epoch: Callable[[TopicId, int], int],
                  owned: Partitions | None) -> Reconciled:
    """Kafka's computeNextAssignment: keep what stays, revoke what goes, take what is free."""
    new_assigned: dict[TopicId, set[int]] = {}
    revoke: dict[TopicId, set[int]] = {}
    pending_assignment: dict[TopicId, set[int]] = {}
    unreleased = False
    for t in sorted(set(target) | set(assigned)):
        tgt, cur = target.get(t, frozenset()), assigned.get(t, frozenset())
        keep = cur & tgt
        to_revoke = cur - keep
        to_assign = set(tgt - keep)
        # A partition still owned by another member (not one this member is itself revoking)
        # is not handed over yet.
        taken = {p for p in to_assign
                 if owner_epoch(t, p) != -1 and p not in member.pending_revocation.get(t, frozenset())}
        if taken:
            unreleased = True
            to_assign -= taken
        if keep:
            new_assigned[t] = set(keep)
        if to_revoke:
            revoke[t] = set(to_revoke)
        if to_assign:
            pending_assignment[t] = to_assign
    def epoch_of(t: TopicId, p: int) -> int:
        return member.partition_epochs.get((t, p), max(member.member_epoch, 0))

    if revoke and _owns_any(owned, freeze(revoke)):
        # Revoke first; the member keeps its epoch until it has let go.
        epochs = {(t, p): epoch_of(t, p) for parts in (new_assigned, revoke) for t, ps in parts.items() for p in ps}
        return Reconciled(M.UNREVOKED_PARTITIONS, member_epoch, freeze(new_assigned), freeze(revoke), epochs,
                          ME.REVOKE)
    epochs = {(t, p): epoch_of(t, p) for t, ps in new_assigned.items() for p in ps}
    for t, ps in pending_assignment.items():
        new_assigned.setdefault(t, set()).update(ps)
        epochs.update({(t, p): target_epoch for p in ps})
    if unreleased:
        return Reconciled(M.UNRELEASED_PARTITIONS, target_epoch, freeze(new_assigned), {}, epochs, ME.UNRELEASED)
    return Reconciled(M.STABLE, target_epoch, freeze(new_assigned), {}, epochs, ME.RECONCILED)
