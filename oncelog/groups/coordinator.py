"""The classic-protocol group coordinator: membership, rebalances, and committed offsets.
Sans-IO: no sockets, no asyncio, no clock of its own.

* Time comes from an injected ``clock()`` (milliseconds); timers fire when :meth:`tick` is
  called, so tests drive session and rebalance timeouts with a fake clock. The broker calls
  :meth:`tick` at :meth:`next_deadline_ms` (a loop timer), so deadlines fire on time.
* ``group.initial.rebalance.delay.ms`` (Kafka's InitialDelayedJoin): the first rebalance of an
  Empty group waits that long for more members, again (up to the same delay) each time one
  joined meanwhile, never beyond the rebalance timeout; only then is the first generation formed.
* JoinGroup and SyncGroup answers may be delayed until the rebalance completes: callers pass a
  ``respond`` callback, called exactly once per request.
* Durable effects go through the injected ``persist(group_id, records, on_done)``: records for
  ``__consumer_offsets`` (group metadata, offset commits, tombstones). ``on_done(error)`` is
  called when they are durable (``error`` None) or not (a :class:`~oncelog.errors.KafkaError`);
  only then are commits visible and Sync answers sent.
* Errors are domain errors (:mod:`oncelog.errors`), each with a message naming what was wrong:
  results and ``respond`` callbacks carry one (None for success), checks that answer at once
  raise them. Handlers turn them into wire codes at the edge (:mod:`oncelog.apis._groups`).

Group states (Kafka's classic protocol)::

                     join                    all joined / rebalance timeout
     +-------+  ---------------->  +--------------------+  --------------->  +----------------------+
     | Empty |                     | PreparingRebalance |                     | CompletingRebalance  |
     +-------+  <----------------  +--------------------+  <---------------  +----------------------+
         |       all members left         ^     ^          join/leave/timeout          | leader's SyncGroup
         |                                |     +-----------------------------+        v
         |                                |   join/leave/timeout/new metadata |   +--------+
         |                                +-----------------------------------+---| Stable |
         v                                                                         +--------+
     +------+   (DeleteGroups on an Empty group; every state may go to Dead on unload)
     | Dead |
     +------+
"""

from __future__ import annotations

import enum
import logging
import uuid
from dataclasses import dataclass, field
from typing import Callable

from .. import errors
from ..config.settings import GroupConfig
from ..errors import KafkaError
from ..notices import notice
from ..state_machine import IllegalStateTransition, check_transition  # noqa: F401 (IllegalStateTransition: re-exported)

from .records import (
    GroupKey,
    GroupValue,
    MemberRecord,
    OffsetKey,
    OffsetValue,
    encode_group_value,
    encode_key,
    encode_offset_value,
)


log = logging.getLogger("oncelog.groups")


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @property
    def kafka_name(self) -> str:
        return self.value


S = GroupState
TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE, S.DEAD}),
    S.PREPARING_REBALANCE: frozenset({S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
    S.COMPLETING_REBALANCE: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.DEAD}),
    S.STABLE: frozenset({S.PREPARING_REBALANCE, S.DEAD}),
    S.DEAD: frozenset(),
}


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
    join_respond: Callable | None = None
    sync_respond: Callable | None = None
    deadline_ms: int = 0

    def metadata_for(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""


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

    def transition(self, new: GroupState, now_ms: int) -> None:
        check_transition(TRANSITIONS, f"group {self.group_id!r}", self.state, new)
        self.state = new
        self.state_timestamp_ms = now_ms

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
        """Each member votes for its most preferred protocol that all members support."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(name for name, _ in m.protocols if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(sorted(votes), key=lambda p: votes[p])

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.join_respond is not None for m in self.members.values())

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), or None if unknown."""
        if self.protocol_type != "consumer" or not self.protocol_name:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            topics |= _consumer_subscription_topics(m.metadata_for(self.protocol_name))
        return topics


def _consumer_subscription_topics(meta: bytes) -> set[str]:
    """ConsumerProtocolSubscription: int16 version, array of int16-length strings, ..."""
    import struct

    try:
        pos = 2
        (count,) = struct.unpack_from(">i", meta, pos)
        pos += 4
        topics = set()
        for _ in range(count):
            (n,) = struct.unpack_from(">h", meta, pos)
            pos += 2
            topics.add(meta[pos : pos + n].decode())
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError):
        return set()


Persist = Callable[[str, list[tuple[bytes, bytes | None]], Callable[[KafkaError | None], None]], None]


class GroupCoordinator:
    def __init__(self, clock: Callable[[], int], persist: Persist, config: GroupConfig = GroupConfig()) -> None:
        self.clock = clock
        self.persist = persist
        self.config = config
        self.groups: dict[str, Group] = {}
        # Transactional offset commits awaiting their producer's COMMIT/ABORT marker:
        # producer id -> {(group, topic, partition): value}
        self.pending_txn_offsets: dict[int, dict[tuple[str, str, int], OffsetValue]] = {}

    # ------------------------------------------------------------------ JoinGroup

    def join(self, *, group_id: str, member_id: str, group_instance_id: str | None, client_id: str,
             client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
             protocols: list[tuple[str, bytes]], require_known_member_id: bool,
             respond: Callable[[JoinResult], None]) -> None:
        now = self.clock()
        def fail(error: KafkaError) -> None:
            respond(JoinResult(error, member_id=member_id))

        if not group_id:
            return fail(errors.InvalidGroupId("JoinGroup: the group id is empty"))
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            return fail(errors.InvalidSessionTimeout(
                f"group {group_id!r}: session timeout {session_timeout_ms} ms is outside "
                f"[{self.config.min_session_timeout_ms}, {self.config.max_session_timeout_ms}] ms "
                "(group.min/max.session.timeout.ms)"))
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return fail(errors.UnknownMemberId(f"group {group_id!r} does not exist, so has no member {member_id!r}"))
            group = self.groups[group_id] = Group(group_id, state_timestamp_ms=now)
        if group.state is S.DEAD:
            return fail(errors.CoordinatorNotAvailable(f"group {group_id!r} is being removed (Dead)"))
        if not group.supports(protocol_type, protocols):
            return fail(errors.InconsistentGroupProtocol(
                f"group {group_id!r}: protocol type {protocol_type!r} with protocols "
                f"{[n for n, _ in protocols]} matches none its members support "
                f"(type {group.protocol_type!r}, {sorted(group.candidate_protocols())})"))
        if rebalance_timeout_ms <= 0:
            rebalance_timeout_ms = session_timeout_ms
        member_args = dict(group_instance_id=group_instance_id, client_id=client_id, client_host=client_host,
                           session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
                           protocol_type=protocol_type, protocols=list(protocols))
        if member_id and group_instance_id is not None:
            known = group.static_members.get(group_instance_id)
            if known is not None and known != member_id:
                # A zombie of a replaced static member: fenced, it must not fence the new one.
                return fail(_fenced(group_id, group_instance_id, member_id, known))
        if not member_id:
            new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if group_instance_id is not None:
                old_id = group.static_members.get(group_instance_id)
                if old_id is not None and old_id in group.members:
                    self._replace_static_member(group, old_id, new_id, member_args, respond, now)
                    return None
            if len(group.members) + len(group.pending_members) >= self.config.max_size:
                return fail(errors.GroupMaxSizeReached(
                    f"group {group_id!r} has reached group.max.size={self.config.max_size} members"))
            if group_instance_id is not None:
                self._add_member(group, new_id, member_args, respond, now)
                return None
            if require_known_member_id:
                group.pending_members[new_id] = now + session_timeout_ms
                return respond(JoinResult(errors.MemberIdRequired(
                    f"group {group_id!r}: join again with the member id {new_id!r} (KIP-394)"), member_id=new_id))
            self._add_member(group, new_id, member_args, respond, now)
            return None
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            self._add_member(group, member_id, member_args, respond, now)
            return None
        member = group.members.get(member_id)
        if member is None:
            return fail(_unknown_member(group_id, member_id))
        if group_instance_id is not None and group.static_members.get(group_instance_id) != member_id:
            return fail(_fenced(group_id, group_instance_id, member_id, group.static_members.get(group_instance_id)))
        changed = member.protocols != list(protocols)
        member.protocols = list(protocols)
        member.session_timeout_ms, member.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
        member.deadline_ms = now + session_timeout_ms
        if member.join_respond is not None:
            # Pipelined duplicate join: the earlier request must still get exactly one answer.
            member.join_respond(JoinResult(errors.RebalanceInProgress(
                f"group {group_id!r}: member {member_id!r} sent another JoinGroup; this one is superseded"),
                member_id=member_id))
            member.join_respond = None
        if group.state is S.PREPARING_REBALANCE:
            member.join_respond = respond
            self._check_join_complete(group)
        elif group.state in (S.COMPLETING_REBALANCE, S.STABLE):
            if changed or (group.state is S.STABLE and member_id == group.leader_id):
                member.join_respond = respond
                self._prepare_rebalance(group, now, f"member {member_id} (client {member.client_id}) rejoined"
                                        + (" with new metadata" if changed else " (leader)"))
            else:
                # A rejoin without changes (e.g. the join response was lost): current generation.
                respond(self._join_result(group, member))
        else:
            fail(errors.UnknownMemberId(f"group {group_id!r} is {group.state.value}: member {member_id!r} "
                                        "must join as a new member"))
        return None

    def _replace_static_member(self, group: Group, old_id: str, new_id: str, args: dict, respond, now: int) -> None:
        """KIP-345: a restarted static member takes over its old identity. The old member id is
        fenced. In Stable with unchanged protocols there is no rebalance: the new member gets the
        current generation and, at SyncGroup, the old assignment."""
        old = group.members.pop(old_id)
        notice(log, "group %s: static member %s (client %s) replaced by %s; the old member id %s is fenced",
               group.group_id, old.group_instance_id, args.get("client_id"), new_id, old_id)
        fenced = _fenced(group.group_id, old.group_instance_id, old_id, new_id)
        if old.join_respond:
            old.join_respond(JoinResult(fenced, member_id=old_id))
        if old.sync_respond:
            old.sync_respond(SyncResult(fenced))
        member = Member(member_id=new_id, **args)
        member.assignment = old.assignment
        member.deadline_ms = now + member.session_timeout_ms
        group.members[new_id] = member
        group.static_members[member.group_instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        if group.state is S.STABLE and member.protocols == old.protocols:
            self._store_group(group, lambda _err: None)
            result = self._join_result(group, member)
            # The leader must not recompute assignments for an unchanged group (KIP-345).
            respond(JoinResult(result.error, result.generation, result.protocol_type, result.protocol_name,
                               result.leader, result.member_id, result.members,
                               skip_assignment=member.member_id == group.leader_id))
            return
        member.join_respond = respond
        if group.state is S.PREPARING_REBALANCE:
            self._check_join_complete(group)
        else:
            self._prepare_rebalance(group, now, f"static member {member.group_instance_id} rejoined with new metadata")

    def _add_member(self, group: Group, member_id: str, args: dict, respond, now: int) -> None:
        group.new_member_added = True
        member = Member(member_id=member_id, **args)
        member.join_respond = respond
        member.deadline_ms = now + member.session_timeout_ms
        if not group.members:
            group.protocol_type = member.protocol_type
        group.members[member_id] = member
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member_id
        if group.leader_id is None or group.leader_id not in group.members:
            group.leader_id = member_id
        notice(log, "group %s: member %s (client %s, host %s%s) joins in state %s", group.group_id, member_id,
               member.client_id, member.client_host,
               f", instance {member.group_instance_id}" if member.group_instance_id is not None else "",
               group.state.value)
        if group.state is S.PREPARING_REBALANCE:
            self._check_join_complete(group)
        else:
            self._prepare_rebalance(group, now, f"member {member_id} (client {member.client_id}) joined")

    def _prepare_rebalance(self, group: Group, now: int, reason: str = "") -> None:
        if group.state is S.COMPLETING_REBALANCE:
            for m in group.members.values():
                m.assignment = b""
                if m.sync_respond:
                    m.sync_respond(SyncResult(errors.RebalanceInProgress(
                        f"group {group.group_id!r}: generation {group.generation} is rebalancing again "
                        f"({reason or 'unspecified'})")))
                    m.sync_respond = None
        was_empty = group.state is S.EMPTY
        if group.state is not S.PREPARING_REBALANCE:
            notice(log, "group %s: preparing to rebalance in state %s with old generation %d (reason: %s)",
                   group.group_id, group.state.value, group.generation, reason or "unspecified")
            group.transition(S.PREPARING_REBALANCE, now)
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        delay = self.config.initial_rebalance_delay_ms
        if was_empty and delay > 0:
            # Kafka's InitialDelayedJoin: wait for more members before the first generation.
            group.initial_delay = True
            group.new_member_added = False
            group.initial_delay_remaining_ms = max(timeout - delay, 0)
            group.rebalance_deadline_ms = now + min(delay, timeout)
            return
        group.rebalance_deadline_ms = now + timeout
        self._check_join_complete(group)

    def _check_join_complete(self, group: Group) -> None:
        if group.state is S.PREPARING_REBALANCE and not group.initial_delay and group.all_joined():
            self._complete_join(group)

    def _initial_delay_expired(self, group: Group, now: int) -> None:
        delay = self.config.initial_rebalance_delay_ms
        if group.new_member_added and group.initial_delay_remaining_ms > 0 and group.members:
            step = min(delay, group.initial_delay_remaining_ms)
            group.initial_delay_remaining_ms = max(group.initial_delay_remaining_ms - delay, 0)
            group.new_member_added = False
            group.rebalance_deadline_ms = now + step
            return
        group.initial_delay = False
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        now = self.clock()
        group.initial_delay = False
        # Dynamic members that did not rejoin in time are gone; static members stay until their
        # session times out (KIP-345).
        for mid in [mid for mid, m in group.members.items() if m.join_respond is None and m.group_instance_id is None]:
            self._drop_member(group, mid)
        group.pending_members.clear()
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(S.EMPTY, now)
            notice(log, "group %s with generation %d is now empty", group.group_id, group.generation)
            self._store_group(group, lambda _err: None)
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        notice(log, "group %s: stabilized generation %d with %d member(s), protocol %s, leader %s",
               group.group_id, group.generation, len(group.members), group.protocol_name, group.leader_id)
        group.transition(S.COMPLETING_REBALANCE, now)
        # Members that do not send SyncGroup within the rebalance timeout are removed.
        group.sync_deadline_ms = now + max(m.rebalance_timeout_ms for m in group.members.values())
        for member in group.members.values():
            respond, member.join_respond = member.join_respond, None
            member.deadline_ms = now + member.session_timeout_ms
            if respond is not None:
                respond(self._join_result(group, member))

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        members = ()
        if member.member_id == group.leader_id:
            members = tuple((m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                            for m in group.members.values())
        return JoinResult(None, group.generation, group.protocol_type, group.protocol_name,
                          group.leader_id or "", member.member_id, members)

    # ------------------------------------------------------------------ SyncGroup

    def sync(self, *, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
             respond: Callable[[SyncResult], None]) -> None:
        group = self.groups.get(group_id)
        error = self._check_member(group_id, group, member_id, group_instance_id)
        if error is not None:
            return respond(SyncResult(error))
        if generation != group.generation:
            return respond(SyncResult(_illegal_generation(group, generation)))
        if (protocol_type and protocol_type != group.protocol_type) or (protocol_name and protocol_name != group.protocol_name):
            return respond(SyncResult(errors.InconsistentGroupProtocol(
                f"group {group_id!r}: SyncGroup for protocol {protocol_type!r}/{protocol_name!r}, the group's is "
                f"{group.protocol_type!r}/{group.protocol_name!r}")))
        member = group.members[member_id]
        member.deadline_ms = self.clock() + member.session_timeout_ms
        if group.state is S.PREPARING_REBALANCE:
            return respond(SyncResult(errors.RebalanceInProgress(
                f"group {group_id!r} is rebalancing: rejoin before SyncGroup")))
        if group.state is S.STABLE:
            return respond(SyncResult(None, group.protocol_type, group.protocol_name, member.assignment))
        if group.state is not S.COMPLETING_REBALANCE:
            return respond(SyncResult(errors.UnknownMemberId(
                f"group {group_id!r} is {group.state.value}: member {member_id!r} must rejoin")))
        if member.sync_respond is not None:
            member.sync_respond(SyncResult(errors.RebalanceInProgress(
                f"group {group_id!r}: member {member_id!r} sent another SyncGroup; this one is superseded")))
        member.sync_respond = respond
        if member_id != group.leader_id:
            return None
        for mid, m in group.members.items():
            m.assignment = assignments.get(mid, b"")
        this_generation = group.generation

        def stored(err: KafkaError | None) -> None:
            if group.state is not S.COMPLETING_REBALANCE or group.generation != this_generation:
                return  # a new rebalance started meanwhile; its members were told already
            if err is not None:
                self._prepare_rebalance(group, self.clock(), f"storing the group's assignment failed ({err})")
                return
            group.transition(S.STABLE, self.clock())
            for m in group.members.values():
                if m.sync_respond:
                    m.sync_respond(SyncResult(None, group.protocol_type, group.protocol_name, m.assignment))
                    m.sync_respond = None

        self._store_group(group, stored)
        return None

    @staticmethod
    def _check_member(group_id: str, group: Group | None, member_id: str, instance_id: str | None) -> KafkaError | None:
        if group is None or group.state is S.DEAD:
            return errors.UnknownMemberId(f"group {group_id!r} does not exist, so has no member {member_id!r}")
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is not None and known != member_id:
                return _fenced(group.group_id, instance_id, member_id, known)
        if member_id not in group.members:
            return _unknown_member(group.group_id, member_id)
        return None

    # ------------------------------------------------------------------ Heartbeat / LeaveGroup

    def heartbeat(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None) -> None:
        """Keep the member alive; raises what it must do instead (rejoin, resync, ...)."""
        group = self.groups.get(group_id)
        error = self._check_member(group_id, group, member_id, group_instance_id)
        if error is not None:
            raise error
        if group.state is S.EMPTY:
            raise errors.UnknownMemberId(f"group {group_id!r} is Empty: member {member_id!r} must rejoin")
        if generation != group.generation:
            raise _illegal_generation(group, generation)
        member = group.members[member_id]
        member.deadline_ms = self.clock() + member.session_timeout_ms
        if group.state is S.PREPARING_REBALANCE:
            raise errors.RebalanceInProgress(f"group {group_id!r} is rebalancing: member {member_id!r} must rejoin")

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[KafkaError | None]:
        """Remove members; per member (in order) None or the error saying why not."""
        group = self.groups.get(group_id)
        results: list[KafkaError | None] = []
        for member_id, instance_id in members:
            if group is None or group.state is S.DEAD:
                results.append(errors.UnknownMemberId(
                    f"group {group_id!r} does not exist, so has no member {member_id or instance_id!r}"))
                continue
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    results.append(errors.UnknownMemberId(
                        f"group {group_id!r} has no static member with instance id {instance_id!r}"))
                    continue
                if member_id and known != member_id:
                    results.append(_fenced(group_id, instance_id, member_id, known))
                    continue
                member_id = known
            if member_id in group.pending_members:
                del group.pending_members[member_id]
                self._check_join_complete(group)
                results.append(None)
                continue
            if member_id not in group.members:
                results.append(_unknown_member(group_id, member_id))
                continue
            notice(log, "group %s: member %s (client %s) left", group_id, member_id,
                   group.members[member_id].client_id)
            self._remove_member_and_rebalance(group, member_id, f"member {member_id} left")
            results.append(None)
        return results

    def _drop_member(self, group: Group, member_id: str) -> None:
        member = group.members.pop(member_id)
        if member.group_instance_id is not None and group.static_members.get(member.group_instance_id) == member_id:
            del group.static_members[member.group_instance_id]
        if group.leader_id == member_id:
            group.leader_id = next(iter(group.members), None)
        if member.join_respond or member.sync_respond:
            removed = errors.UnknownMemberId(f"group {group.group_id!r}: member {member_id!r} was removed")
            if member.join_respond:
                member.join_respond(JoinResult(removed, member_id=member_id))
            if member.sync_respond:
                member.sync_respond(SyncResult(removed))

    def _remove_member_and_rebalance(self, group: Group, member_id: str, reason: str = "") -> None:
        self._drop_member(group, member_id)
        now = self.clock()
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now, reason or f"member {member_id} removed")
        elif group.state is S.PREPARING_REBALANCE:
            self._check_join_complete(group)

    # ------------------------------------------------------------------ timers

    def tick(self) -> None:
        """Fire due timers: session timeouts, pending-member timeouts, rebalance timeouts,
        and expiry of offsets of empty groups."""
        now = self.clock()
        for group in list(self.groups.values()):
            for mid, deadline in list(group.pending_members.items()):
                if deadline <= now:
                    del group.pending_members[mid]
                    self._check_join_complete(group)
            # A member waiting for its JoinGroup or SyncGroup answer is alive.
            for mid in [mid for mid, m in group.members.items()
                        if m.deadline_ms <= now and m.join_respond is None and m.sync_respond is None]:
                if mid in group.members:
                    m = group.members[mid]
                    notice(log, "group %s: member %s (client %s) expired: no heartbeat within its "
                           "session.timeout.ms=%d; removing it", group.group_id, mid, m.client_id, m.session_timeout_ms)
                    self._remove_member_and_rebalance(group, mid, f"member {mid} expired (session timeout)")
            if group.state is S.PREPARING_REBALANCE and now >= group.rebalance_deadline_ms:
                if group.initial_delay:
                    self._initial_delay_expired(group, now)
                else:
                    self._complete_join(group)
            if group.state is S.COMPLETING_REBALANCE and now >= group.sync_deadline_ms:
                missing = [mid for mid, m in group.members.items() if m.sync_respond is None]
                for mid in missing:
                    notice(log, "group %s: member %s (client %s) expired: no SyncGroup within the rebalance "
                           "timeout; removing it", group.group_id, mid, group.members[mid].client_id)
                    self._drop_member(group, mid)
                if missing:
                    self._prepare_rebalance(group, now, "members missed SyncGroup")
            if group.state is S.EMPTY:
                self._expire_offsets(group, now)

    def next_deadline_ms(self) -> int | None:
        """When :meth:`tick` next has something to do for a membership timer (session,
        pending member, rebalance, sync), or None. Offset expiry is not included: it is
        coarse and the broker ticks periodically for it."""
        best = None
        for group in self.groups.values():
            for deadline in group.pending_members.values():
                if best is None or deadline < best:
                    best = deadline
            for m in group.members.values():
                if m.join_respond is None and m.sync_respond is None and (best is None or m.deadline_ms < best):
                    best = m.deadline_ms
            if group.state is S.PREPARING_REBALANCE:
                d = group.rebalance_deadline_ms
            elif group.state is S.COMPLETING_REBALANCE:
                d = group.sync_deadline_ms
            else:
                continue
            if best is None or d < best:
                best = d
        return best

    def _expire_offsets(self, group: Group, now: int) -> None:
        # KIP-211: an Empty group's offsets expire retention after the later of their commit
        # and the moment the group became Empty.
        retention = self.config.offsets_retention_ms
        expired = [tp for tp, v in group.offsets.items()
                   if now - max(v.commit_timestamp, group.state_timestamp_ms) >= retention]
        idle_too_long = now - group.state_timestamp_ms >= retention
        if not expired and (group.offsets or group.members or group.pending_members or not idle_too_long):
            return
        records = [(encode_key(OffsetKey(group.group_id, t, p)), None) for t, p in expired]
        for tp in expired:
            del group.offsets[tp]
        if not group.offsets and not group.members:
            records.append((encode_key(GroupKey(group.group_id)), None))
            group.transition(S.DEAD, now)
            del self.groups[group.group_id]
        notice(log, "group %s: %d committed offset(s) expired (offsets.retention.ms=%d)%s", group.group_id,
               len(expired), retention, "; group metadata removed" if group.state is S.DEAD else "")
        self.persist(group.group_id, records, lambda _err: None)

    # ------------------------------------------------------------------ describe / list / delete

    def describe(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def list_groups(self) -> list[Group]:
        return [g for g in self.groups.values() if g.state is not S.DEAD]

    def delete_groups(self, group_ids: list[str], respond: Callable[[dict[str, KafkaError | None]], None]) -> None:
        """Delete Empty groups; answers per group id None or the error saying why not."""
        results: dict[str, KafkaError | None] = {}
        records: list[tuple[bytes, bytes | None]] = []
        now = self.clock()
        for gid in dict.fromkeys(group_ids):  # a repeated id is one group
            group = self.groups.get(gid)
            if group is None or group.state is S.DEAD:
                results[gid] = errors.GroupIdNotFound(f"Group {gid} not found.")
            elif group.state is not S.EMPTY:
                results[gid] = errors.NonEmptyGroup(
                    f"group {gid!r} is {group.state.value} with {len(group.members)} member(s): only Empty groups "
                    "can be deleted")
            else:
                records += [(encode_key(OffsetKey(gid, t, p)), None) for t, p in group.offsets]
                records.append((encode_key(GroupKey(gid)), None))
                group.transition(S.DEAD, now)
                del self.groups[gid]
                results[gid] = None
        if not records:
            return respond(results)
        # Group ids of one request may live on different partitions: persist per group.
        self._persist_many(records, lambda err: respond({g: (err if e is None else e) for g, e in results.items()}))
        return None

    def _persist_many(self, records, on_done) -> None:
        from .records import decode_key

        by_group: dict[str, list] = {}
        for key, value in records:
            by_group.setdefault(decode_key(key).group, []).append((key, value))
        remaining = [len(by_group)]
        worst: list[KafkaError | None] = [None]

        def one_done(err):
            if err is not None:
                worst[0] = err
            remaining[0] -= 1
            if remaining[0] == 0:
                on_done(worst[0])

        for gid, recs in by_group.items():
            self.persist(gid, recs, one_done)

    # ------------------------------------------------------------------ offsets

    def validate_offset_commit(self, group_id: str, generation: int, member_id: str,
                               group_instance_id: str | None) -> None:
        """May these offsets be committed? Raises why not. Creates a simple (unmanaged) group for
        generation -1 commits to an unknown group, as Kafka does."""
        if not group_id:
            raise errors.InvalidGroupId("OffsetCommit: the group id is empty")
        group = self.groups.get(group_id)
        if group is None:
            if generation < 0:
                self.groups[group_id] = Group(group_id, state_timestamp_ms=self.clock())
                return
            raise errors.IllegalGeneration(f"group {group_id!r} does not exist, so has no generation {generation}")
        if group.state is S.DEAD:
            raise errors.CoordinatorNotAvailable(f"group {group_id!r} is being removed (Dead)")
        if generation < 0 and group.state is S.EMPTY:
            return
        error = self._check_member(group_id, group, member_id, group_instance_id)
        if error is not None:
            raise error
        if generation != group.generation:
            raise _illegal_generation(group, generation)
        if group.state is S.COMPLETING_REBALANCE:
            raise errors.RebalanceInProgress(f"group {group_id!r} is completing a rebalance: commit after SyncGroup")
        member = group.members[member_id]
        member.deadline_ms = self.clock() + member.session_timeout_ms

    def commit_offsets(self, group_id: str, offsets: dict[tuple[str, int], OffsetValue],
                       on_done: Callable[[KafkaError | None], None]) -> None:
        """Persist then apply validated offsets (call validate_offset_commit first)."""
        records = [(encode_key(OffsetKey(group_id, t, p)), encode_offset_value(v)) for (t, p), v in offsets.items()]

        def stored(err: KafkaError | None) -> None:
            if err is None:
                group = self.groups.get(group_id)
                if group is not None:
                    group.offsets.update(offsets)
            on_done(err)

        self.persist(group_id, records, stored)

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None) -> dict[tuple[str, int], OffsetValue | None]:
        group = self.groups.get(group_id)
        offsets = group.offsets if group else {}
        if partitions is None:
            return dict(offsets)
        return {tp: offsets.get(tp) for tp in partitions}

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]],
                       respond: Callable[[KafkaError | None, dict[tuple[str, int], KafkaError | None]], None]) -> None:
        """OffsetDelete: answers (the group's error or None, per partition None or its error)."""
        group = self.groups.get(group_id)
        if group is None or group.state is S.DEAD:
            return respond(errors.GroupIdNotFound(f"Group {group_id} not found."), {})
        subscribed = group.subscribed_topics() if group.state is not S.EMPTY else set()
        if subscribed is None and group.state is not S.EMPTY:
            return respond(errors.NonEmptyGroup(
                f"group {group_id!r} is {group.state.value} with protocol type {group.protocol_type!r}: its "
                "subscriptions are unknown, so no offsets can be deleted"), {})
        results: dict[tuple[str, int], KafkaError | None] = {}
        deleted = []
        for tp in partitions:
            if tp[0] in subscribed:
                results[tp] = errors.GroupSubscribedToTopic(
                    f"group {group_id!r} is {group.state.value} and its members subscribe to topic {tp[0]!r}")
            else:
                results[tp] = None
                if tp in group.offsets:
                    deleted.append(tp)
        if not deleted:
            return respond(None, results)
        records = [(encode_key(OffsetKey(group_id, t, p)), None) for t, p in deleted]

        def stored(err):
            if err is None:
                for tp in deleted:
                    group.offsets.pop(tp, None)
            respond(err, results)

        self.persist(group_id, records, stored)
        return None

    # ------------------------------------------------------------------ transactional offsets

    def stage_txn_offsets(self, producer_id: int, group_id: str, offsets: dict[tuple[str, int], OffsetValue]) -> None:
        staged = self.pending_txn_offsets.setdefault(producer_id, {})
        for (topic, partition), value in offsets.items():
            staged[(group_id, topic, partition)] = value

    def complete_txn_offsets(self, producer_id: int, commit: bool) -> None:
        """The producer's transaction ended: its offsets become visible (commit) or vanish."""
        staged = self.pending_txn_offsets.pop(producer_id, {})
        if not commit:
            return
        for (group_id, topic, partition), value in staged.items():
            group = self.groups.get(group_id)
            if group is None:
                group = self.groups[group_id] = Group(group_id, state_timestamp_ms=self.clock())
            group.offsets[(topic, partition)] = value

    def has_pending_txn_offset(self, group_id: str, topic: str, partition: int) -> bool:
        key = (group_id, topic, partition)
        return any(key in staged for staged in self.pending_txn_offsets.values())

    def validate_txn_offset_commit(self, group_id: str, generation: int, member_id: str,
                                   group_instance_id: str | None) -> None:
        """KIP-447: a transactional commit carrying group metadata is fenced like a plain one;
        raises why not."""
        if not group_id:
            raise errors.InvalidGroupId("TxnOffsetCommit: the group id is empty")
        if generation < 0 and not member_id:
            return  # no group metadata sent (older clients / standalone)
        group = self.groups.get(group_id)
        if group is None or group.state is S.DEAD:
            raise errors.IllegalGeneration(f"group {group_id!r} does not exist, so has no generation {generation}")
        error = self._check_member(group_id, group, member_id, group_instance_id)
        if error is not None:
            raise error
        if generation != group.generation:
            raise _illegal_generation(group, generation)

    def check_stable_offset(self, group_id: str, topic: str, partition: int) -> None:
        """require_stable OffsetFetch: raises UnstableOffsetCommit while a transactional commit
        of this partition's offset awaits its marker."""
        if self.has_pending_txn_offset(group_id, topic, partition):
            raise errors.UnstableOffsetCommit(
                f"group {group_id!r}: the offset of {topic}-{partition} has a transactional commit awaiting its "
                "transaction's end")

    # ------------------------------------------------------------------ persistence

    def _store_group(self, group: Group, on_done: Callable[[KafkaError | None], None]) -> None:
        value = GroupValue(
            protocol_type=group.protocol_type or "", generation=group.generation, protocol=group.protocol_name,
            leader=group.leader_id, state_timestamp=group.state_timestamp_ms,
            members=tuple(MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                       m.rebalance_timeout_ms, m.session_timeout_ms,
                                       m.metadata_for(group.protocol_name or ""), m.assignment)
                          for m in group.members.values()),
        )
        self.persist(group.group_id, [(encode_key(GroupKey(group.group_id)), encode_group_value(value))], on_done)

    def load_offset(self, key: OffsetKey, value: OffsetValue | None) -> None:
        """Replay of ``__consumer_offsets`` at start-up."""
        group = self.groups.get(key.group)
        if value is None:
            if group is not None:
                group.offsets.pop((key.topic, key.partition), None)
            return
        if group is None:
            group = self.groups[key.group] = Group(key.group)
        group.offsets[(key.topic, key.partition)] = value

    def load_group(self, group_id: str, value: GroupValue | None) -> None:
        """Replay: restore a group's last stored generation and members. Restored members must
        heartbeat within their session timeout (counted from the load) or are removed."""
        if value is None:
            self.groups.pop(group_id, None)
            return
        now = self.clock()
        group = self.groups.get(group_id) or Group(group_id)
        self.groups[group_id] = group
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.generation = value.generation
        group.leader_id = value.leader
        group.members.clear()
        group.static_members.clear()
        for m in value.members:
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                            m.rebalance_timeout_ms, value.protocol_type, [(value.protocol or "", m.subscription)],
                            assignment=m.assignment, deadline_ms=now + m.session_timeout_ms)
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        group.state = S.STABLE if group.members else S.EMPTY
        group.state_timestamp_ms = value.state_timestamp


def _unknown_member(group_id: str, member_id: str) -> errors.UnknownMemberId:
    return errors.UnknownMemberId(f"group {group_id!r} has no member {member_id!r}")


def _fenced(group_id: str, instance_id: str | None, member_id: str, current: str | None) -> errors.FencedInstanceId:
    return errors.FencedInstanceId(f"group {group_id!r}: static member {instance_id!r} is now member {current!r}; "
                                   f"member id {member_id!r} is fenced")


def _illegal_generation(group: Group, generation: int) -> errors.IllegalGeneration:
    return errors.IllegalGeneration(f"group {group.group_id!r} is at generation {group.generation}, not {generation}")
