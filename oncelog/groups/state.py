"""A consumer group's state: Kafka's classic-protocol GroupState, its transition table keyed by
event, and what the coordinator keeps per group and per member (and writes to
``__consumer_offsets`` as the group's GroupMetadata record, see :mod:`oncelog.groups.records`).

Group states (Kafka's classic protocol), each arrow labelled with its :class:`GroupEvent`::

                 JoinGroup                       all joined / rebalance timeout
     +-------+  ----------->  +--------------------+  ----------------------->  +---------------------+
     | Empty |                | PreparingRebalance |                            | CompletingRebalance |
     +-------+  <-----------  +--------------------+  <-----------------------  +---------------------+
         |       all left               ^            JoinGroup / LeaveGroup /            | leader's SyncGroup
         |                              |            session expiry / rebalance          | (its record durable)
         |                              |            timeout (a SyncGroup missed) /      v
         |                              |            record not written             +--------+
         |                              +-------------------------------------------| Stable |
         |                      JoinGroup / LeaveGroup / session expiry /           +--------+
         |                      converted from a consumer group (restored Stable)
         v
     +------+   DeleteGroups (or offset expiry) of an Empty group
     | Dead |
     +------+

:data:`EVENT_TRIGGERED_TRANSITIONS` is the same graph as a table, ``[state][event] -> next
state`` (h11's shape): every change of state goes through :meth:`Group.transition`, which reads
it and raises :class:`~oncelog.state_machine.IllegalStateTransition` naming the state and the
event for a move the table does not have. Two changes are not transitions, and say so:
:meth:`Group.restore_from` (a group as stored, at replay, or as converted from a consumer group:
Stable if it has members, else Empty, as Kafka's loading does) and :meth:`Group.undelete` (a
deletion whose records were not written, reverted).

:data:`TRANSITIONS` is the graph the table draws (state -> next states); it is Kafka's
``validPreviousStates`` read forwards, but the moves to Dead from the non-Empty states, which
Kafka makes when a coordinator unloads its partition (oncelog, one broker, never does).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable, Iterable

from .. import errors
from ..errors import KafkaError
from ..protocol.internal_records import Reader
from ..state_machine import KafkaState, next_state, reachable
from .records import GroupKey, GroupValue, MemberRecord, OffsetValue, encode_key


class GroupState(KafkaState, enum.Enum):
    # The value is Kafka's name (DescribeGroups answers it), as kafka_name derives it.
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class GroupEvent(enum.Enum):
    """What moves a classic group from one state to another (the value names it in errors)."""
    # A new member joins, or a known one rejoins with new protocols (or as the Stable group's
    # leader): a new generation is needed.
    JOIN = "JoinGroup"
    # Every member has sent its JoinGroup (and no initial delay is running).
    ALL_JOINED = "all members joined"
    # The group's rebalance deadline passed: in PreparingRebalance the members that did not
    # rejoin are dropped and the generation formed (also the end of the initial delay); in
    # CompletingRebalance a member missed its SyncGroup and is dropped.
    REBALANCE_TIMEOUT = "rebalance timeout"
    # The generation forms with no member left (every member left, or none rejoined in time).
    ALL_LEFT = "all members left"
    # The leader's SyncGroup: its assignments are durable with the group's record.
    LEADER_SYNC = "leader's SyncGroup"
    # The group's record with the leader's assignments was not written: rebalance again.
    SYNC_NOT_STORED = "group record not written"
    # LeaveGroup of a member (or of a pending one, KIP-394).
    LEAVE = "LeaveGroup"
    # A member's session timed out.
    SESSION_EXPIRY = "session expiry"
    # A consumer group left with classic members became this group (the migration's downgrade):
    # its members keep their assignments until they rejoin.
    CONVERTED = "converted from a consumer group"
    # DeleteGroups, or the expiry of an Empty group's last offsets.
    DELETE = "DeleteGroups"


S, E = GroupState, GroupEvent
EVENT_TRIGGERED_TRANSITIONS: dict[GroupState, dict[GroupEvent, GroupState]] = {
    S.EMPTY: {
        E.JOIN: S.PREPARING_REBALANCE,
        E.DELETE: S.DEAD,
    },
    S.PREPARING_REBALANCE: {
        E.ALL_JOINED: S.COMPLETING_REBALANCE,
        E.REBALANCE_TIMEOUT: S.COMPLETING_REBALANCE,
        E.ALL_LEFT: S.EMPTY,
    },
    S.COMPLETING_REBALANCE: {
        E.LEADER_SYNC: S.STABLE,
        E.JOIN: S.PREPARING_REBALANCE,
        E.LEAVE: S.PREPARING_REBALANCE,
        E.SESSION_EXPIRY: S.PREPARING_REBALANCE,
        E.REBALANCE_TIMEOUT: S.PREPARING_REBALANCE,
        E.SYNC_NOT_STORED: S.PREPARING_REBALANCE,
    },
    S.STABLE: {
        E.JOIN: S.PREPARING_REBALANCE,
        E.LEAVE: S.PREPARING_REBALANCE,
        E.SESSION_EXPIRY: S.PREPARING_REBALANCE,
        E.CONVERTED: S.PREPARING_REBALANCE,
    },
    S.DEAD: {},
}
TRANSITIONS: dict[GroupState, frozenset[GroupState]] = reachable(EVENT_TRIGGERED_TRANSITIONS)


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    # The answers this member waits for (a JoinGroup / SyncGroup held until the rebalance
    # completes); while one is set the member is alive whatever its deadline.
    join_respond: Callable | None = None
    sync_respond: Callable | None = None
    deadline_ms: int = 0  # session deadline

    def metadata_for(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""


# persist(group_id, records, on_done): append ``__consumer_offsets`` records (key, value or None
# for a tombstone) to the group's partition; on_done(None) once durable, else on_done(error)
# (:meth:`oncelog.groups.store.OffsetsTopic.persist`).
Persist = Callable[[str, list[tuple[bytes, bytes | None]], Callable[[KafkaError | None], None]], None]


@dataclass(frozen=True)
class JoinResult:
    error: KafkaError | None
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True)
class SyncResult:
    error: KafkaError | None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class Group:
    group_id: str
    state: GroupState = S.EMPTY
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> deadline
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    offsets: dict[tuple[str, int], OffsetValue] = field(default_factory=dict)
    rebalance_deadline_ms: int = 0
    sync_deadline_ms: int = 0
    state_timestamp_ms: int = 0
    # InitialDelayedJoin: while set, the join completes only at rebalance_deadline_ms.
    initial_delay: bool = False
    initial_delay_remaining_ms: int = 0
    new_member_added: bool = False

    def transition(self, event: GroupEvent, now_ms: int) -> GroupState:
        """Move as :data:`EVENT_TRIGGERED_TRANSITIONS` says for ``event``; returns the new state.
        Raises :class:`~oncelog.state_machine.IllegalStateTransition` (the group unchanged) if
        the table has no such move."""
        self.state = next_state(EVENT_TRIGGERED_TRANSITIONS, f"group {self.group_id!r}", self.state, event)
        self.state_timestamp_ms = now_ms
        return self.state

    def to_value(self) -> GroupValue:
        """The group's GroupMetadata record: generation, protocol, leader, members with the
        subscription of the chosen protocol and their assignment."""
        protocol = self.protocol_name or ""
        return GroupValue(
            protocol_type=self.protocol_type or "", generation=self.generation, protocol=self.protocol_name,
            leader=self.leader_id, state_timestamp=self.state_timestamp_ms,
            members=tuple(MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                       m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata_for(protocol),
                                       m.assignment)
                          for m in self.members.values()),
        )

    def restore_from(self, members: Iterable[Member], *, generation: int, protocol_type: str | None,
                     protocol_name: str | None, leader_id: str | None, state_timestamp_ms: int) -> None:
        """The group as stored (replay of its GroupMetadata record, :func:`members_of`) or as
        converted from a consumer group (the migration's downgrade): its generation, protocol,
        leader and members; offsets are kept (they are records of their own). Not a transition:
        the group restarts Stable if it has members, else Empty, whatever state it was in when
        written, as Kafka's loading does (its members hold their assignments)."""
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.generation = generation
        self.leader_id = leader_id
        self.members.clear()
        self.static_members.clear()
        for m in members:
            self.members[m.member_id] = m
            if m.group_instance_id is not None:
                self.static_members[m.group_instance_id] = m.member_id
        self.state = S.STABLE if self.members else S.EMPTY
        self.state_timestamp_ms = state_timestamp_ms

    def join_result(self, member: Member) -> JoinResult:
        """The JoinGroup answer of ``member`` in the current generation; the leader's carries
        every member's subscription, to compute the assignments."""
        members = ()
        if member.member_id == self.leader_id:
            members = tuple((m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
                            for m in self.members.values())
        return JoinResult(None, self.generation, self.protocol_type, self.protocol_name,
                          self.leader_id or "", member.member_id, members)

    def next_deadline_ms(self) -> int | None:
        """The group's next membership timer (a pending member's, a session not held open by
        a waiting JoinGroup/SyncGroup, the rebalance or sync deadline of its state), or None."""
        deadlines = list(self.pending_members.values())
        deadlines += [m.deadline_ms for m in self.members.values() if m.join_respond is None and m.sync_respond is None]
        if self.state is S.PREPARING_REBALANCE:
            deadlines.append(self.rebalance_deadline_ms)
        elif self.state is S.COMPLETING_REBALANCE:
            deadlines.append(self.sync_deadline_ms)
        return min(deadlines, default=None)

    def candidate_protocols(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & {n for n, _ in protocols})

    def select_protocol(self) -> str:
        return select_protocol(self.members.values())

    group_type = "classic"

    def is_empty(self) -> bool:
        return self.state is S.EMPTY

    def is_dead(self) -> bool:
        return self.state is S.DEAD

    def mark_dead(self, now_ms: int) -> None:
        self.transition(E.DELETE, now_ms)

    def undelete(self) -> None:
        """Back to Empty: its deletion's records were not written. A revert, not a transition."""
        self.state = S.EMPTY

    def tombstones(self) -> list[tuple[bytes, bytes | None]]:
        """The group's own record, deleted (its offsets are records of their own)."""
        return [(encode_key(GroupKey(self.group_id)), None)]

    def drop_member(self, member_id: str) -> None:
        """Remove a member (its static identity, its leadership); a JoinGroup or SyncGroup it
        waits on is answered UNKNOWN_MEMBER_ID. The rebalance this calls for is the caller's."""
        member = self.members.pop(member_id)
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        if member.join_respond or member.sync_respond:
            removed = errors.UnknownMemberId(f"group {self.group_id!r}: member {member_id!r} was removed")
            if member.join_respond:
                member.join_respond(JoinResult(removed, member_id=member_id))
            if member.sync_respond:
                member.sync_respond(SyncResult(removed))

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.join_respond is not None for m in self.members.values())

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), or None if unknown: another
        protocol type, no protocol chosen yet, or a subscription that does not parse (Kafka's
        ClassicGroup.computeSubscribedTopics)."""
        if self.protocol_type != "consumer":
            return None
        if not self.members:
            return set()
        if not self.protocol_name:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            got = consumer_subscription_topics(m.metadata_for(self.protocol_name))
            if got is None:
                return None
            topics |= got
        return topics


def members_of(value: GroupValue, now_ms: int) -> list[Member]:
    """The members of a stored GroupMetadata record, each with the subscription of the group's
    protocol; they must heartbeat within their session timeout from ``now_ms``."""
    return [Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                   m.rebalance_timeout_ms, value.protocol_type, [(value.protocol or "", m.subscription)],
                   assignment=m.assignment, deadline_ms=now_ms + m.session_timeout_ms)
            for m in value.members]


def select_protocol(members: Iterable[Member]) -> str:
    """Each member votes for its most preferred protocol that all members support."""
    members = list(members)
    candidates = set.intersection(*[{name for name, _ in m.protocols} for m in members])
    votes: dict[str, int] = {}
    for m in members:
        choice = next(name for name, _ in m.protocols if name in candidates)
        votes[choice] = votes.get(choice, 0) + 1
    return max(sorted(votes), key=lambda p: votes[p])


def consumer_subscription_topics(meta: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription (int16 version, array of string topics, then
    fields this does not need, read as version 0: every version starts so); None if it does not parse."""
    try:
        r = Reader(meta)
        r.i16()
        return {t for t in r.array(Reader.string) if t is not None}
    except ValueError:  # TruncatedRecord, UnicodeDecodeError
        return None


# The errors a member check answers, each naming the group and member.

def unknown_member(group_id: str, member_id: str) -> errors.UnknownMemberId:
    return errors.UnknownMemberId(f"group {group_id!r} has no member {member_id!r}")


def fenced(group_id: str, instance_id: str | None, member_id: str, current: str | None) -> errors.FencedInstanceId:
    return errors.FencedInstanceId(f"group {group_id!r}: static member {instance_id!r} is now member {current!r}; "
                                   f"member id {member_id!r} is fenced")


def illegal_generation(group: Group, generation: int) -> errors.IllegalGeneration:
    return errors.IllegalGeneration(f"group {group.group_id!r} is at generation {group.generation}, not {generation}")


def check_member(group_id: str, group: Group | None, member_id: str, instance_id: str | None) -> KafkaError | None:
    """Is ``member_id`` (with its static ``instance_id``) a member of ``group``? None, or why not."""
    if group is None or group.is_dead():
        return errors.UnknownMemberId(f"group {group_id!r} does not exist, so has no member {member_id!r}")
    if group.group_type != "classic":
        return errors.UnknownMemberId(f"group {group_id!r} is a consumer group: member {member_id!r} does not use "
                                      "the classic protocol")
    if instance_id is not None:  # Kafka's ClassicGroup.validateMember
        known = group.static_members.get(instance_id)
        if known is None:
            return errors.UnknownMemberId(f"group {group_id!r} has no static member with instance id {instance_id!r}")
        if known != member_id:
            return fenced(group.group_id, instance_id, member_id, known)
    if member_id not in group.members:
        return unknown_member(group.group_id, member_id)
    return None
