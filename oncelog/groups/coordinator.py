"""The group coordinator: one namespace of group ids, classic and consumer (KIP-848) groups side
by side. The classic protocol is here (JoinGroup and SyncGroup in numbered steps, Heartbeat,
LeaveGroup, timers); a consumer group's requests go to :mod:`oncelog.groups.consumer_coordinator`,
a classic member's of a consumer group and every conversion between the two to
:mod:`oncelog.groups.migration`, offsets to :mod:`oncelog.groups.offsets` (with DeleteGroups),
the member checks of offset commits to :mod:`oncelog.groups.commit_checks`. Sans-IO: no sockets,
no asyncio, no clock of its own.

* States, members and results are in :mod:`oncelog.groups.state`: every change of a group's
  state is an event of its table, through ``Group.transition(event)``.
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
"""

from __future__ import annotations

import logging
import uuid
from typing import Callable, Mapping

from .. import errors
from ..config.settings import GroupConfig
from ..errors import KafkaError
from ..notices import notice
from .commit_checks import CommitChecks, PartitionCheck
from .consumer_coordinator import ConsumerGroupCoordinator
from .consumer_state import ConsumerGroup
from .migration import Migration
from .offsets import GroupOffsets, TopicPartition
from .records import GroupKey, GroupValue, OffsetKey, OffsetValue, encode_group_value, encode_key
from .streams_coordinator import StreamsGroupCoordinator
from .streams_group import StreamsGroup
from .state import (Group, GroupEvent, GroupState, JoinResult, Member, Persist, SyncResult, check_member,
                    fenced, illegal_generation, members_of, unknown_member)

log = logging.getLogger("oncelog.groups")

S, E = GroupState, GroupEvent


class GroupCoordinator:
    def __init__(self, clock: Callable[[], int], persist: Persist, config: GroupConfig = GroupConfig(),
                 topics: Callable[[], Mapping[str, tuple]] = dict,
                 group_configs: Callable[[str], Mapping[str, int]] | None = None) -> None:
        """``topics()``: every topic now, name -> (topic id, partition count), for consumer
        (KIP-848) groups, whose assignments the coordinator computes; ``group_configs(group_id)``:
        a group's own configs (Kafka's GROUP config resource), over the broker's."""
        self.clock = clock
        self.persist = persist
        self.config = config
        # Classic and consumer groups share one namespace of group ids (as in Kafka).
        self.groups: dict[str, Group | ConsumerGroup] = {}
        self.offsets = GroupOffsets(self.groups, clock, persist)
        self.checks = CommitChecks(self.groups, clock, topics)
        self.consumer = ConsumerGroupCoordinator(self.groups, clock, persist, config, topics, group_configs)
        # Classic <-> consumer conversions, and classic members of consumer groups.
        self.migration = self.consumer.migration = Migration(self, self.consumer)
        self.streams = StreamsGroupCoordinator(self.groups, clock, persist, topics)  # KIP-1071 streams groups
        self.completed_rebalances = 0  # classic groups made Stable by a SyncGroup (oncelog.metrics)

    # ------------------------------------------------------------------ JoinGroup

    def join(self, *, group_id: str, member_id: str, group_instance_id: str | None, client_id: str,
             client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
             protocols: list[tuple[str, bytes]], require_known_member_id: bool,
             respond: Callable[[JoinResult], None], skip_assignment: bool = True,
             describable=None) -> None:
        """JoinGroup (Kafka's classic protocol, KIP-394, KIP-345). ``respond`` is called once,
        at once or when the rebalance the join starts or waits for completes. ``skip_assignment``:
        the request's version can answer SkipAssignment (JoinGroup v9+). ``describable``: the
        topics the joining member's principal may DESCRIBE (a consumer group's regexes resolved
        at a classic member's join resolve to those; None: every topic, no authorizer).

        1. Check the request: a group id; a session timeout within
           ``group.min/max.session.timeout.ms``.
        2. Find the group, or create it for a new member (an unknown group has no members); a
           Dead group is unavailable; the protocol type and protocols must match what its
           members support.
        3. Fence a zombie: a known member id that is no longer its static instance's.
        4. A new member (no member id): a restarted static member takes over its old identity
           (:meth:`_replace_static_member`); a full group (``group.max.size``) refuses; a
           dynamic member that must know its member id first (KIP-394) gets it, is pending, and
           joins again; otherwise it is added (:meth:`_add_member`, which starts or joins the
           rebalance).
        5. A pending member (KIP-394's second join) is added.
        6. A known member: it must be a member and not fenced; its protocols and timeouts are
           refreshed, its session restarts; a pipelined earlier JoinGroup is superseded.
        7. By the group's state: PreparingRebalance waits for the others; CompletingRebalance
           or Stable rebalance if its metadata changed (or the Stable leader rejoined), else
           answer the current generation; Empty: it must join as a new member.
        """
        now = self.clock()

        def fail(error: KafkaError) -> None:
            respond(JoinResult(error, member_id=member_id))

        # Step 1. The request itself.
        if not group_id:
            return fail(errors.InvalidGroupId("JoinGroup: the group id is empty"))
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            return fail(errors.InvalidSessionTimeout(
                f"group {group_id!r}: session timeout {session_timeout_ms} ms is outside "
                f"[{self.config.min_session_timeout_ms}, {self.config.max_session_timeout_ms}] ms "
                "(group.min/max.session.timeout.ms)"))
        # Step 2. The group.
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            if not group.is_empty():
                # A classic member of a consumer group (Kafka 4's migration path).
                return self.migration.classic_join(
                    group, member_id=member_id, instance_id=group_instance_id, client_id=client_id,
                    client_host=client_host, session_timeout_ms=session_timeout_ms,
                    rebalance_timeout_ms=rebalance_timeout_ms if rebalance_timeout_ms > 0 else session_timeout_ms,
                    protocol_type=protocol_type, protocols=list(protocols),
                    require_known_member_id=require_known_member_id, respond=respond,
                    **({} if describable is None else {"describable": describable}))
            group = self.migration.classic_group_for_join(group, now)
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
        # Step 3. A zombie of a replaced static member is fenced: it must not fence the new one.
        if member_id and group_instance_id is not None:
            known = group.static_members.get(group_instance_id)
            if known is not None and known != member_id:
                return fail(fenced(group_id, group_instance_id, member_id, known))
        if not member_id:
            # Step 4. A new member (:meth:`_join_new_member`).
            return self._join_new_member(group, member_args, require_known_member_id, respond, now,
                                         skip_assignment)
        if member_id in group.pending_members:
            # Step 5. KIP-394's second join, with the member id the first one was given.
            del group.pending_members[member_id]
            return self._add_member(group, member_id, member_args, respond, now)
        # Steps 6 and 7. A known member rejoins (:meth:`_rejoin`).
        return self._rejoin(group, member_id, member_args, respond, now)

    def _join_new_member(self, group: Group, args: dict, require_known_member_id: bool,
                         respond: Callable[[JoinResult], None], now: int, skip_assignment: bool = True) -> None:
        # Step 4. A new member: a member id, then by kind (static, KIP-394 dynamic, dynamic).
        instance_id = args["group_instance_id"]
        new_id = f"{args['client_id'] or 'member'}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None and old_id in group.members:
                return self._replace_static_member(group, old_id, new_id, args, respond, now, skip_assignment)
        if len(group.members) + len(group.pending_members) >= self.config.max_size:
            return respond(JoinResult(errors.GroupMaxSizeReached(
                f"group {group.group_id!r} has reached group.max.size={self.config.max_size} members"), member_id=""))
        if instance_id is None and require_known_member_id:
            group.pending_members[new_id] = now + args["session_timeout_ms"]
            return respond(JoinResult(errors.MemberIdRequired(
                f"group {group.group_id!r}: join again with the member id {new_id!r} (KIP-394)"), member_id=new_id))
        return self._add_member(group, new_id, args, respond, now)

    def _rejoin(self, group: Group, member_id: str, args: dict, respond: Callable[[JoinResult], None],
                now: int) -> None:
        group_id, instance_id = group.group_id, args["group_instance_id"]
        # Step 6. A known member, not fenced: refresh it.
        member = group.members.get(member_id)
        if member is None:
            return respond(JoinResult(unknown_member(group_id, member_id), member_id=member_id))
        if instance_id is not None and group.static_members.get(instance_id) != member_id:
            return respond(JoinResult(fenced(group_id, instance_id, member_id, group.static_members.get(instance_id)),
                                      member_id=member_id))
        changed = member.protocols != args["protocols"]
        member.protocols = args["protocols"]
        member.session_timeout_ms, member.rebalance_timeout_ms = args["session_timeout_ms"], args["rebalance_timeout_ms"]
        member.deadline_ms = now + member.session_timeout_ms
        if member.join_respond is not None:
            # Pipelined duplicate join: the earlier request must still get exactly one answer.
            member.join_respond(JoinResult(errors.RebalanceInProgress(
                f"group {group_id!r}: member {member_id!r} sent another JoinGroup; this one is superseded"),
                member_id=member_id))
            member.join_respond = None
        # Step 7. By the group's state.
        if group.state is S.PREPARING_REBALANCE:
            member.join_respond = respond
            self._check_join_complete(group)
        elif group.state in (S.COMPLETING_REBALANCE, S.STABLE):
            if changed or (group.state is S.STABLE and member_id == group.leader_id):
                member.join_respond = respond
                self.prepare_rebalance(group, E.JOIN, now, f"member {member_id} (client {member.client_id}) rejoined"
                                        + (" with new metadata" if changed else " (leader)"))
            else:
                # A rejoin without changes (e.g. the join response was lost): current generation.
                respond(group.join_result(member))
        else:
            respond(JoinResult(errors.UnknownMemberId(
                f"group {group_id!r} is {group.state.value}: member {member_id!r} must join as a new member"),
                member_id=member_id))
        return None

    def _replace_static_member(self, group: Group, old_id: str, new_id: str, args: dict, respond, now: int,
                               skip_assignment: bool = True) -> None:
        """KIP-345: a restarted static member takes over its old identity. The old member id is
        fenced. In Stable, unless its protocols change the protocol the group would select, there
        is no rebalance (new metadata or not: Kafka's updateStaticMemberThenRebalanceOrCompleteJoin):
        the new member gets the current generation and, at SyncGroup, the old assignment; from
        JoinGroup v9 the leader is told to skip the assignment, before v9 the answer names the
        leader as it was (the old member id, if it led) and lists no members."""
        current_leader = group.leader_id
        old = group.members.pop(old_id)
        notice(log, "group %s: static member %s (client %s) replaced by %s; the old member id %s is fenced",
               group.group_id, old.group_instance_id, args.get("client_id"), new_id, old_id)
        zombie = fenced(group.group_id, old.group_instance_id, old_id, new_id)
        if old.join_respond:
            old.join_respond(JoinResult(zombie, member_id=old_id))
        if old.sync_respond:
            old.sync_respond(SyncResult(zombie))
        member = Member(member_id=new_id, **args)
        member.assignment = old.assignment
        member.deadline_ms = now + member.session_timeout_ms
        group.members[new_id] = member
        group.static_members[member.group_instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        if group.state is S.STABLE and group.select_protocol() == group.protocol_name:
            self.store_group(group, lambda _err: None)
            result = group.join_result(member)
            if not skip_assignment:
                respond(JoinResult(result.error, result.generation, result.protocol_type, result.protocol_name,
                                   current_leader or "", result.member_id, ()))
                return
            # The leader must not recompute assignments for an unchanged group (KIP-345).
            respond(JoinResult(result.error, result.generation, result.protocol_type, result.protocol_name,
                               result.leader, result.member_id, result.members,
                               skip_assignment=member.member_id == group.leader_id))
            return
        member.join_respond = respond
        if group.state is S.PREPARING_REBALANCE:
            self._check_join_complete(group)
        else:
            self.prepare_rebalance(group, E.JOIN, now,
                                    f"static member {member.group_instance_id} rejoined with new metadata")

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
            self.prepare_rebalance(group, E.JOIN, now, f"member {member_id} (client {member.client_id}) joined")

    def prepare_rebalance(self, group: Group, event: GroupEvent, now: int, reason: str = "") -> None:
        """``event`` starts a rebalance: PreparingRebalance (unless the group is in it already),
        with the deadline by which members must rejoin (the initial delay of an Empty group)."""
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
            group.transition(event, now)
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
            self._complete_join(group, E.ALL_JOINED)

    def _initial_delay_expired(self, group: Group, now: int) -> None:
        delay = self.config.initial_rebalance_delay_ms
        if group.new_member_added and group.initial_delay_remaining_ms > 0 and group.members:
            step = min(delay, group.initial_delay_remaining_ms)
            group.initial_delay_remaining_ms = max(group.initial_delay_remaining_ms - delay, 0)
            group.new_member_added = False
            group.rebalance_deadline_ms = now + step
            return
        group.initial_delay = False
        self._complete_join(group, E.REBALANCE_TIMEOUT)

    def _complete_join(self, group: Group, event: GroupEvent) -> None:
        """The generation forms (``event``: all joined, or the rebalance deadline passed):
        CompletingRebalance with the members that rejoined, or Empty if none is left."""
        now = self.clock()
        group.initial_delay = False
        # Dynamic members that did not rejoin in time are gone; static members stay until their
        # session times out (KIP-345).
        for mid in [mid for mid, m in group.members.items() if m.join_respond is None and m.group_instance_id is None]:
            group.drop_member(mid)
        group.pending_members.clear()
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(E.ALL_LEFT, now)
            notice(log, "group %s with generation %d is now empty", group.group_id, group.generation)
            self.store_group(group, lambda _err: None)
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        notice(log, "group %s: stabilized generation %d with %d member(s), protocol %s, leader %s",
               group.group_id, group.generation, len(group.members), group.protocol_name, group.leader_id)
        group.transition(event, now)
        # Members that do not send SyncGroup within the rebalance timeout are removed.
        group.sync_deadline_ms = now + max(m.rebalance_timeout_ms for m in group.members.values())
        for member in group.members.values():
            respond, member.join_respond = member.join_respond, None
            member.deadline_ms = now + member.session_timeout_ms
            if respond is not None:
                respond(group.join_result(member))

    # ------------------------------------------------------------------ SyncGroup

    def sync(self, *, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
             respond: Callable[[SyncResult], None]) -> None:
        """SyncGroup: the leader hands out the generation's assignments, every member gets its
        own. ``respond`` is called once, at once or when the leader's assignment is durable.

        1. Check the member: the group has it and it is not fenced; the generation and the
           protocol are the group's.
        2. Its session restarts.
        3. By the group's state: PreparingRebalance: rejoin first; Stable: its assignment at
           once; Empty: it must rejoin.
        4. CompletingRebalance: the answer waits (a pipelined earlier SyncGroup is superseded);
           a follower's waits for the leader's SyncGroup.
        5. The leader's SyncGroup sets every member's assignment and persists the group's
           record (GroupMetadata with the assignments).
        6. Once durable, if the group is still in this generation's CompletingRebalance: Stable,
           and every waiting member gets its assignment. Not durable: rebalance again.
        """
        # Step 1. The member, its generation and protocol.
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and not group.is_dead():
            return self.migration.classic_sync(group, generation=generation, member_id=member_id,
                                              instance_id=group_instance_id, protocol_type=protocol_type,
                                              protocol_name=protocol_name, respond=respond)
        error = check_member(group_id, group, member_id, group_instance_id)
        if error is not None:
            return respond(SyncResult(error))
        if generation != group.generation:
            return respond(SyncResult(illegal_generation(group, generation)))
        if (protocol_type and protocol_type != group.protocol_type) or (protocol_name and protocol_name != group.protocol_name):
            return respond(SyncResult(errors.InconsistentGroupProtocol(
                f"group {group_id!r}: SyncGroup for protocol {protocol_type!r}/{protocol_name!r}, the group's is "
                f"{group.protocol_type!r}/{group.protocol_name!r}")))
        # Step 2. Its session restarts.
        member = group.members[member_id]
        member.deadline_ms = self.clock() + member.session_timeout_ms
        # Step 3. By the group's state.
        if group.state is S.PREPARING_REBALANCE:
            return respond(SyncResult(errors.RebalanceInProgress(
                f"group {group_id!r} is rebalancing: rejoin before SyncGroup")))
        if group.state is S.STABLE:
            return respond(SyncResult(None, group.protocol_type, group.protocol_name, member.assignment))
        if group.state is not S.COMPLETING_REBALANCE:
            return respond(SyncResult(errors.UnknownMemberId(
                f"group {group_id!r} is {group.state.value}: member {member_id!r} must rejoin")))
        # Step 4. CompletingRebalance: the answer waits; a follower's for the leader.
        if member.sync_respond is not None:
            member.sync_respond(SyncResult(errors.RebalanceInProgress(
                f"group {group_id!r}: member {member_id!r} sent another SyncGroup; this one is superseded")))
        member.sync_respond = respond
        if member_id != group.leader_id:
            return None
        # Step 5. The leader's assignments, made durable with the group's record.
        for mid, m in group.members.items():
            m.assignment = assignments.get(mid, b"")
        this_generation = group.generation

        def stored(err: KafkaError | None) -> None:
            # Step 6. Durable: Stable, and every member its assignment.
            if group.state is not S.COMPLETING_REBALANCE or group.generation != this_generation:
                return  # a new rebalance started meanwhile; its members were told already
            if err is not None:
                self.prepare_rebalance(group, E.SYNC_NOT_STORED, self.clock(),
                                        f"storing the group's assignment failed ({err})")
                return
            group.transition(E.LEADER_SYNC, self.clock())
            self.completed_rebalances += 1
            for m in group.members.values():
                if m.sync_respond:
                    m.sync_respond(SyncResult(None, group.protocol_type, group.protocol_name, m.assignment))
                    m.sync_respond = None

        self.store_group(group, stored)
        return None

    # ------------------------------------------------------------------ Heartbeat / LeaveGroup

    def heartbeat(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None) -> None:
        """Keep the member alive; raises what it must do instead (rejoin, resync, ...)."""
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and not group.is_dead():
            return self.migration.classic_heartbeat(group, generation, member_id, group_instance_id)
        error = check_member(group_id, group, member_id, group_instance_id)
        if error is not None:
            raise error
        if group.state is S.EMPTY:
            raise errors.UnknownMemberId(f"group {group_id!r} is Empty: member {member_id!r} must rejoin")
        if generation != group.generation:
            raise illegal_generation(group, generation)
        member = group.members[member_id]
        member.deadline_ms = self.clock() + member.session_timeout_ms
        if group.state is S.PREPARING_REBALANCE:
            raise errors.RebalanceInProgress(f"group {group_id!r} is rebalancing: member {member_id!r} must rejoin")

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[KafkaError | None]:
        """Remove members; per member (in order) None or the error saying why not."""
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and not group.is_dead():
            return self.migration.classic_leave(group, members)
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
                    results.append(fenced(group_id, instance_id, member_id, known))
                    continue
                member_id = known
            if member_id in group.pending_members:
                del group.pending_members[member_id]
                if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
                    # Kafka rebalances on any member's leave, a pending one's too
                    # (GroupMetadataManager.classicGroupLeaveToClassicGroup)
                    self.prepare_rebalance(group, E.LEAVE, self.clock(), f"pending member {member_id} left")
                else:
                    self._check_join_complete(group)
                results.append(None)
                continue
            if member_id not in group.members:
                results.append(unknown_member(group_id, member_id))
                continue
            notice(log, "group %s: member %s (client %s) left", group_id, member_id,
                   group.members[member_id].client_id)
            self._remove_member_and_rebalance(group, member_id, E.LEAVE, f"member {member_id} left")
            results.append(None)
        return results

    def _remove_member_and_rebalance(self, group: Group, member_id: str, event: GroupEvent, reason: str) -> None:
        group.drop_member(member_id)
        now = self.clock()
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, event, now, reason)
        elif group.state is S.PREPARING_REBALANCE:
            self._check_join_complete(group)

    # ------------------------------------------------------------------ timers

    def tick(self) -> None:
        """Fire due timers: session timeouts, pending-member timeouts, rebalance timeouts,
        and expiry of offsets of empty groups."""
        now = self.clock()
        self.consumer.tick()
        self.streams.tick()
        for group in list(self.groups.values()):
            if isinstance(group, (ConsumerGroup, StreamsGroup)):
                if group.is_empty():
                    self.offsets.expire(group, now, self.config.offsets_retention_ms)
                continue
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
                    self._remove_member_and_rebalance(group, mid, E.SESSION_EXPIRY,
                                                      f"member {mid} expired (session timeout)")
            if group.state is S.PREPARING_REBALANCE and now >= group.rebalance_deadline_ms:
                if group.initial_delay:
                    self._initial_delay_expired(group, now)
                else:
                    self._complete_join(group, E.REBALANCE_TIMEOUT)
            if group.state is S.COMPLETING_REBALANCE and now >= group.sync_deadline_ms:
                missing = [mid for mid, m in group.members.items() if m.sync_respond is None]
                for mid in missing:
                    notice(log, "group %s: member %s (client %s) expired: no SyncGroup within the rebalance "
                           "timeout; removing it", group.group_id, mid, group.members[mid].client_id)
                    group.drop_member(mid)
                if missing:
                    self.prepare_rebalance(group, E.REBALANCE_TIMEOUT, now, "members missed SyncGroup")
            if group.state is S.EMPTY:
                self.offsets.expire(group, now, self.config.offsets_retention_ms)

    def next_deadline_ms(self) -> int | None:
        """When :meth:`tick` next has something to do for a membership timer (session,
        pending member, rebalance, sync), or None. Offset expiry is not included: it is
        coarse and the broker ticks periodically for it."""
        classic = (g.next_deadline_ms() for g in self.groups.values() if not isinstance(g, ConsumerGroup))
        deadlines = [d for d in (*classic, self.consumer.next_deadline_ms(), self.streams.next_deadline_ms())
                     if d is not None]
        return min(deadlines, default=None)

    # ------------------------------------------------------------------ describe / list / delete

    def describe(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def list_groups(self) -> list[Group | ConsumerGroup]:
        return [g for g in self.groups.values() if not g.is_dead()]

    def delete_groups(self, group_ids: list[str], respond: Callable[[dict[str, KafkaError | None]], None]) -> None:
        """Delete Empty groups with their offsets (:meth:`GroupOffsets.delete_groups`)."""
        self.offsets.delete_groups(group_ids, respond)

    # ------------------------------------------------------------------ offset commit checks (CommitChecks)

    def validate_offset_commit(self, group_id: str, generation: int, member_id: str,
                               group_instance_id: str | None, *, api_version: int = 9) -> PartitionCheck | None:
        """May these offsets be committed? (:meth:`~oncelog.groups.commit_checks.CommitChecks.offset_commit`)"""
        return self.checks.offset_commit(group_id, generation, member_id, group_instance_id, api_version=api_version)

    def validate_txn_offset_commit(self, group_id: str, generation: int, member_id: str,
                                   group_instance_id: str | None) -> PartitionCheck | None:
        """KIP-447 (:meth:`~oncelog.groups.commit_checks.CommitChecks.txn_offset_commit`)."""
        return self.checks.txn_offset_commit(group_id, generation, member_id, group_instance_id)

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> None:
        """OffsetFetch v9+ (:meth:`~oncelog.groups.commit_checks.CommitChecks.offset_fetch`)."""
        self.checks.offset_fetch(group_id, member_id, member_epoch)

    # ------------------------------------------------------------------ offsets (GroupOffsets)

    def commit_offsets(self, group_id: str, offsets: dict[TopicPartition, OffsetValue],
                       on_done: Callable[[KafkaError | None], None]) -> None:
        """Persist then apply validated offsets (call :meth:`validate_offset_commit` first)."""
        self.offsets.commit(group_id, offsets, on_done)

    def fetch_offsets(self, group_id: str,
                      partitions: list[TopicPartition] | None) -> dict[TopicPartition, OffsetValue | None]:
        return self.offsets.fetch(group_id, partitions)

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition],
                       respond: Callable[[KafkaError | None, dict[TopicPartition, KafkaError | None]], None]) -> None:
        self.offsets.delete(group_id, partitions, respond)

    def stage_txn_offsets(self, producer_id: int, group_id: str, offsets: dict[TopicPartition, OffsetValue]) -> None:
        self.offsets.stage_transactional(producer_id, group_id, offsets)

    def complete_txn_offsets(self, producer_id: int, commit: bool) -> None:
        self.offsets.complete_transactional(producer_id, commit)

    def has_pending_txn_offset(self, group_id: str, topic: str, partition: int) -> bool:
        return self.offsets.has_pending_transactional(group_id, topic, partition)

    def check_stable_offset(self, group_id: str, topic: str, partition: int) -> None:
        self.offsets.check_stable(group_id, topic, partition)

    # ------------------------------------------------------------------ persistence

    def store_group(self, group: Group, on_done: Callable[[KafkaError | None], None]) -> None:
        self.persist(group.group_id, [(encode_key(GroupKey(group.group_id)), encode_group_value(group.to_value()))],
                     on_done)

    def load_offset(self, key: OffsetKey, value: OffsetValue | None) -> None:
        """Replay of ``__consumer_offsets`` at start-up: an offset commit (None: its tombstone)."""
        self.offsets.load(key, value)

    def load_group(self, group_id: str, value: GroupValue | None) -> None:
        """Replay: restore a group's last stored generation and members (:meth:`Group.restore_from`),
        or forget it (a tombstone). Restored members must heartbeat within their session timeout
        (counted from the load) or are removed."""
        current = self.groups.get(group_id)
        if value is None:
            if isinstance(current, Group):
                if current.offsets:  # a conversion to a consumer group keeps the offsets
                    self.groups[group_id] = Group(group_id, offsets=current.offsets)
                else:
                    self.groups.pop(group_id, None)
            return
        if not isinstance(current, Group):  # none, or a consumer group converted back
            current = self.groups[group_id] = Group(group_id, offsets=current.offsets if current else {})
        current.restore_from(members_of(value, self.clock()), generation=value.generation,
                             protocol_type=value.protocol_type or None, protocol_name=value.protocol,
                             leader_id=value.leader, state_timestamp_ms=value.state_timestamp)

    def load_consumer_record(self, key, value) -> None:
        """Replay: a consumer group's record (:mod:`oncelog.groups.consumer_records`)."""
        self.consumer.load(key, value)

    def load_streams_record(self, key, value) -> None:
        """Replay: a streams group's record (:mod:`oncelog.groups.streams_records`)."""
        self.streams.load(key, value)

    def finish_load(self) -> None:
        """After the replay of ``__consumer_offsets``: consumer and streams groups' states and timers."""
        self.consumer.finish_load()
        self.streams.finish_load()
