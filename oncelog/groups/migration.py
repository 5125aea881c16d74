"""Migration between the classic and the consumer (KIP-848) protocol, both directions (Kafka 4's
online migration: GroupMetadataManager's convertToConsumerGroup, convertToClassicGroup and the
classicGroup*ToConsumerGroup handlers), so an application's consumers can move to
``group.protocol=consumer`` one at a time, or back. Sans-IO: it drives the two coordinators,
which share one namespace of group ids; only the conversions are here, each coordinator keeps
its own protocol.

When a group changes protocol (``group.consumer.migration.policy``, Kafka's
ConsumerGroupMigrationPolicy)::

    policy          empty group          classic -> consumer            consumer -> classic
                    (either direction)   (a member with members left)   (the last consumer member leaves)
    disabled        converted            GROUP_ID_NOT_FOUND             stays a consumer group
    upgrade         converted            converted (:meth:`upgrade`)    stays a consumer group
    downgrade       converted            GROUP_ID_NOT_FOUND             converted (:meth:`downgrade`)
    bidirectional   converted            converted                      converted

Upgrade, at a consumer-protocol member's first heartbeat (epoch 0) to a classic group
(:meth:`upgrade`, called by the heartbeat's step 3):

1. An Empty classic group is converted whatever the policy: its record is deleted, its offsets
   stay, and the heartbeat goes on in a new consumer group.
2. A classic group with members is converted only if the policy allows it and it is a Stable
   consumer-protocol group whose members' subscriptions and assignments parse, below
   ``group.consumer.max.size`` (Kafka's validateOnlineUpgrade); otherwise the heartbeat is
   answered GROUP_ID_NOT_FOUND.
3. Each classic member becomes a member of the consumer group that keeps its protocols
   (``classic``), its subscription, and its assignment at the group's generation, which is its
   member epoch and the group's group and assignment epoch: nobody's partitions move.
4. The records: the classic group's tombstone, then every member's, the group epoch, the target
   and current assignments (Kafka's order); the group is in the namespace from now on. The
   heartbeat then adds the new member (a new group epoch): the classic members learn of it at
   their next Heartbeat (REBALANCE_IN_PROGRESS) and rejoin, as classic members of the consumer
   group (below).

Downgrade, once the last consumer-protocol member is gone (:meth:`maybe_downgrade`, after a
leave, a LeaveGroup or a fence):

1. The policy allows it, classic members remain, they fit ``group.max.size`` (Kafka's
   validateOnlineDowngrade). An Empty consumer group is instead converted at the next JoinGroup
   whatever the policy (:meth:`classic_group_for_join`): its records are deleted, its offsets stay.
2. The classic group (:meth:`downgrade`): each member with its protocols, session timeout and
   current assignment; the generation is the group epoch before the leave that triggered this
   (Kafka converts instead of bumping it), so the members' next Heartbeat carries it; restored
   as replay restores a group (:meth:`~oncelog.groups.state.Group.restore_from`, Stable).
3. The records: the consumer group's tombstones, the classic group's record.
4. A rebalance (``GroupEvent.CONVERTED``): each member is told at its next heartbeat
   (REBALANCE_IN_PROGRESS) and rejoins; offsets stay.

Classic members in a consumer group (:meth:`classic_join`, :meth:`classic_sync`,
:meth:`classic_heartbeat`, :meth:`classic_leave`), as Kafka's GroupMetadataManager serves them:

* JoinGroup: its subscription (the topics, and from v1 the partitions it still owns) becomes the
  member's; the group epoch and target assignment move as for any member; the member is
  reconciled with what it says it owns (an eager client has revoked everything). The answer's
  generation is the member epoch; no leader assigns: the coordinator did.
* SyncGroup: its assigned partitions, as a ConsumerProtocolAssignment.
* Heartbeat: REBALANCE_IN_PROGRESS while the member is not reconciled to the group's epoch, so it
  rejoins (revoking as its assignor says) until it has its whole target.
* LeaveGroup: removed as a consumer-protocol member's leave (epoch -1).
* Offset commits: by generation = member epoch; a mismatch is ILLEGAL_GENERATION
  (:mod:`oncelog.groups.commit_checks`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from .. import errors
from ..errors import KafkaError
from ..notices import notice
from ..protocol import consumer_protocol as cp
from . import classic_members as classic
from . import consumer_records as cr
from .consumer_assignment import Describable, every_topic_describable, metadata_hash
from .consumer_state import (
    ConsumerGroup,
    ConsumerMember,
    Record,
    current_assignment_record,
    freeze,
    group_epoch_record,
    member_metadata_record,
    new_group,
    new_member_id,
    target_epoch_record,
    target_member_record,
)
from .state import Group, GroupEvent, GroupState, JoinResult, Member, SyncResult, select_protocol

if TYPE_CHECKING:
    from .consumer_coordinator import ConsumerGroupCoordinator
    from .coordinator import GroupCoordinator

log = logging.getLogger("oncelog.groups")


class Migration:
    """The conversions between the two coordinators' groups, and the classic protocol's requests
    to a consumer group."""

    def __init__(self, classic_coordinator: "GroupCoordinator", consumer: "ConsumerGroupCoordinator") -> None:
        self.classic = classic_coordinator
        self.consumer = consumer
        self.groups = consumer.groups  # the one namespace, shared by both coordinators
        self.config = consumer.config

    def _allows(self, direction: str) -> bool:
        return self.config.consumer_migration_policy in (direction, "bidirectional")

    # ------------------------------------------------------------------ classic -> consumer

    def upgrade(self, group: Group, records: list[Record], now: int) -> ConsumerGroup | None:
        """A consumer-protocol member joins classic ``group``: the consumer group it becomes
        (recorded in ``records``), or None if it may not (steps 1-4 of the upgrade)."""
        # Step 1. An empty classic group, whatever the policy.
        if group.is_empty():
            notice(log, "group %s: the empty classic group is converted to a consumer group", group.group_id)
            records.extend(group.tombstones())
            converted = self.groups[group.group_id] = new_group(group.group_id, now, offsets=group.offsets)
            return converted
        # Step 2. One with members: as the policy and Kafka's checks say.
        if not self._may_upgrade(group):
            return None
        notice(log, "group %s: classic group with %d member(s) at generation %d converted to a consumer group "
               "(group.consumer.migration.policy=%s)", group.group_id, len(group.members), group.generation,
               self.config.consumer_migration_policy)
        # Step 3. Its members, with their assignments at the generation as their epoch.
        topics = self.consumer.topics()
        epoch = max(group.generation, 1)
        converted = ConsumerGroup(group.group_id, group_epoch=epoch, assignment_epoch=epoch, offsets=group.offsets,
                                  state_timestamp_ms=now)
        for m in group.members.values():
            _, subscribed, _ = cp.parse_subscription(m.metadata_for(group.protocol_name or ""))
            assigned = freeze(classic.by_id(cp.parse_assignment(m.assignment), topics))
            member = ConsumerMember(
                m.member_id, instance_id=m.group_instance_id, client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=subscribed, rebalance_timeout_ms=m.rebalance_timeout_ms,
                member_epoch=epoch, previous_member_epoch=epoch, assigned=assigned,
                partition_epochs={(t, p): epoch for t, ps in assigned.items() for p in ps},
                classic=cr.ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
                session_deadline_ms=now + m.session_timeout_ms)
            converted.members[m.member_id] = member
            if member.instance_id is not None:
                converted.static_members[member.instance_id] = m.member_id
            converted.target[m.member_id] = assigned
        converted.subscription_metadata = self.consumer.assignment.subscription_metadata(converted)
        converted.metadata_hash = metadata_hash(converted.subscription_metadata)
        # Step 4. The records, in Kafka's order; the group replaces the classic one.
        gid = group.group_id
        records.extend(group.tombstones())
        records.extend(member_metadata_record(gid, m) for m in converted.members.values())
        records.append(group_epoch_record(converted))
        records.extend(target_member_record(gid, mid, target) for mid, target in converted.target.items())
        records.append(target_epoch_record(gid, epoch))
        records.extend(current_assignment_record(gid, m) for m in converted.members.values())
        converted.update_state(now)
        self.groups[gid] = converted
        return converted

    def _may_upgrade(self, group: Group) -> bool:
        """Kafka's validateOnlineUpgrade: the policy allows it, the classic group is a Stable
        consumer-protocol group whose members' assignments parse, and it fits the size limit."""
        if not self._allows("upgrade"):
            return False
        if group.state is not GroupState.STABLE or group.protocol_type != "consumer":
            return False
        if len(group.members) >= self.config.consumer_max_size:
            return False
        return all(cp.parse_assignment(m.assignment) is not None and
                   cp.parse_subscription(m.metadata_for(group.protocol_name or "")) is not None
                   for m in group.members.values())

    # ------------------------------------------------------------------ consumer -> classic

    def classic_group_for_join(self, group: ConsumerGroup, now: int) -> Group:
        """An empty consumer group becomes a classic one when a JoinGroup arrives (Kafka's
        maybeDeleteEmptyConsumerGroup): its records are deleted, its offsets stay."""
        notice(log, "group %s: the empty consumer group is converted to a classic group", group.group_id)
        self.classic.persist(group.group_id, group.tombstones(), lambda _err: None)
        converted = self.groups[group.group_id] = Group(group.group_id, offsets=group.offsets,
                                                        state_timestamp_ms=now)
        return converted

    def maybe_downgrade(self, group: ConsumerGroup) -> None:
        """Step 1 of the downgrade (Kafka's validateOnlineDowngrade): once the last
        consumer-protocol member is gone and classic members remain, the group becomes a classic
        group again (policy downgrade or bidirectional, within group.max.size)."""
        if (group.dead or not group.members or not self._allows("downgrade")
                or len(group.members) > self.config.max_size
                or any(m.classic is None for m in group.members.values())
                or self.groups.get(group.group_id) is not group):
            return
        notice(log, "group %s: its last consumer-protocol member is gone; the group with %d classic member(s) is "
               "converted to a classic group", group.group_id, len(group.members))
        self.downgrade(group)

    def downgrade(self, cg: ConsumerGroup) -> None:
        """Steps 2-4 of the downgrade (Kafka's convertToClassicGroup): the classic group with the
        members, their protocols and current assignments, Stable, then a rebalance."""
        now = self.classic.clock()
        topics = self.consumer.topics()
        # Step 2. The classic group, restored as replay restores one: its members hold their
        # assignments. The generation is the group epoch before the leave that triggered this
        # (Kafka converts instead of bumping it): the classic members' epoch, so their next
        # heartbeat is answered REBALANCE_IN_PROGRESS, not ILLEGAL_GENERATION.
        members = []
        for m in cg.members.values():
            protocols = list(m.classic.supported_protocols)
            parsed = cp.parse_subscription(protocols[0][1]) if protocols else None
            members.append(Member(
                member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                client_host=m.client_host, session_timeout_ms=m.classic.session_timeout_ms,
                rebalance_timeout_ms=max(m.rebalance_timeout_ms, 0) or m.classic.session_timeout_ms,
                protocol_type="consumer", protocols=protocols,
                assignment=cp.encode_assignment(classic.by_name(m.assigned, topics), parsed[0] if parsed else 0),
                deadline_ms=now + m.classic.session_timeout_ms))
        group = Group(cg.group_id, offsets=cg.offsets)
        group.restore_from(members, generation=max(cg.group_epoch - 1, 0), protocol_type="consumer",
                           protocol_name=select_protocol(members), leader_id=members[0].member_id,
                           state_timestamp_ms=now)
        self.groups[cg.group_id] = group
        # Step 3. The records: the consumer group's deleted, the classic group's.
        self.classic.persist(cg.group_id, cg.tombstones(), lambda _err: None)
        self.classic.store_group(group, lambda _err: None)
        # Step 4. A rebalance: the members rejoin.
        self.classic.prepare_rebalance(group, GroupEvent.CONVERTED, now,
                                       "converted from a consumer group (its last consumer-protocol member left)")

    # ------------------------------------------------------------------ classic members of a consumer group

    def classic_join(self, group: ConsumerGroup, *, member_id: str, instance_id: str | None, client_id: str,
                     client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                     protocols: list[tuple[str, bytes]], require_known_member_id: bool,
                     respond: Callable[[JoinResult], None],
                     describable: Describable = every_topic_describable) -> None:
        """JoinGroup of a classic-protocol consumer into a consumer group (Kafka's
        classicGroupJoinToConsumerGroup); ``respond`` once the records are durable. The group's
        regexes, if this join resolves them, resolve to what ``describable`` allows (the joining
        member's principal's, as Kafka)."""
        consumer = self.consumer
        now = consumer.clock()
        gid = group.group_id

        def fail(error: KafkaError, mid: str = member_id) -> None:
            respond(JoinResult(error, member_id=mid))

        supported = self._classic_protocols(group, exclude=member_id)
        names = [n for n, _ in protocols]
        usable = [n for n in names if supported is None or n in supported]
        chosen = next(((n, md) for n, md in protocols if n in usable), None)
        parsed = cp.parse_subscription(chosen[1]) if chosen is not None else None
        if protocol_type != "consumer" or chosen is None or parsed is None:
            return fail(errors.InconsistentGroupProtocol(
                f"Member {member_id or '(new)'}'s protocols are not supported: group {gid!r} is a consumer group "
                f"(protocol type {protocol_type!r}, protocols {names})."))
        version, subscribed, owned_by_name = parsed
        if not member_id and instance_id is None and require_known_member_id:
            return fail(errors.MemberIdRequired(
                f"group {gid!r}: join again with the member id given (KIP-394)"), new_member_id())
        if not member_id:
            member_id = new_member_id()
        if (len(group.members) >= self.config.consumer_max_size and member_id not in group.members
                and not (instance_id is not None and instance_id in group.static_members)):
            return fail(errors.GroupMaxSizeReached(
                f"The consumer group has reached its maximum capacity of {self.config.consumer_max_size} members."))
        before = group.snapshot()
        records: list[Record] = []
        member = group.members.get(member_id)
        if member is not None and member.classic is None:
            return fail(errors.UnknownMemberId(f"Member {member_id} does not use the classic protocol."))
        if instance_id is not None:
            known_id = group.static_members.get(instance_id)
            if known_id is not None and known_id != member_id and known_id in group.members:
                old = group.members[known_id]
                member = consumer.replace_static(group, old, member_id, records, now)
        if member is None:
            notice(log, "group %s: member %s (client %s) joins the consumer group using the classic protocol", gid,
                   member_id, client_id)
            member = ConsumerMember(member_id, instance_id=instance_id)
        group.touch(member)
        member.classic = cr.ClassicMemberMetadata(session_timeout_ms, tuple(protocols))
        owned = classic.by_id(owned_by_name, consumer.topics())
        try:
            consumer.update_and_reconcile(group, member, -1, instance_id, None, rebalance_timeout_ms, client_id,
                                          client_host, subscribed, None, None, owned, records, now, describable)
        except KafkaError as exc:
            group.restore_from(before)
            return fail(exc)
        result = JoinResult(None, member.member_epoch, "consumer", chosen[0], "", member_id, ())
        consumer.write(gid, group, before, records, result, respond,
                       error_result=lambda e: JoinResult(e, member_id=member_id))
        return None

    def classic_sync(self, group: ConsumerGroup, *, generation: int, member_id: str, instance_id: str | None,
                     protocol_type: str | None, protocol_name: str | None,
                     respond: Callable[[SyncResult], None]) -> None:
        """SyncGroup of a classic member: its assigned partitions (Kafka's
        classicGroupSyncToConsumerGroup)."""
        try:
            member = self._classic_member(group, member_id, instance_id, generation)
        except KafkaError as exc:
            return respond(SyncResult(exc))
        chosen = member.classic.supported_protocols[0][0] if member.classic.supported_protocols else None
        names = [n for n, _ in member.classic.supported_protocols]
        if (protocol_type and protocol_type != "consumer") or (protocol_name and protocol_name not in names):
            return respond(SyncResult(errors.InconsistentGroupProtocol(
                f"group {group.group_id!r}: SyncGroup for protocol {protocol_type!r}/{protocol_name!r}")))
        name = protocol_name or chosen
        meta = dict(member.classic.supported_protocols).get(name, b"")
        parsed = cp.parse_subscription(meta)
        version = parsed[0] if parsed is not None else 0
        member.session_deadline_ms = self.consumer.clock() + self.consumer.session_timeout_ms(member, group.group_id)
        respond(SyncResult(None, "consumer", name,
                           cp.encode_assignment(classic.by_name(member.assigned, self.consumer.topics()),
                                                version)))
        return None

    def classic_heartbeat(self, group: ConsumerGroup, generation: int, member_id: str,
                          instance_id: str | None) -> None:
        """Heartbeat of a classic member: raises REBALANCE_IN_PROGRESS while it is not reconciled
        to the group's epoch, so it rejoins (Kafka's classicGroupHeartbeatToConsumerGroup)."""
        member = self._classic_member(group, member_id, instance_id, generation)
        member.session_deadline_ms = self.consumer.clock() + self.consumer.session_timeout_ms(member, group.group_id)
        if not member.is_reconciled_to(group.group_epoch):
            raise errors.RebalanceInProgress(
                f"group {group.group_id!r} is rebalancing: member {member_id!r} must rejoin")

    def classic_leave(self, group: ConsumerGroup, members: list[tuple[str, str | None]]) -> list[KafkaError | None]:
        """LeaveGroup of classic members (each removed as a leave, epoch -1); then the group may
        downgrade."""
        now = self.consumer.clock()
        results: list[KafkaError | None] = []
        before = group.snapshot()
        records: list[Record] = []
        for member_id, instance_id in members:
            mid = member_id
            if instance_id is not None:
                mid = group.static_members.get(instance_id)
                if mid is None:
                    results.append(errors.UnknownMemberId(f"Instance id {instance_id} is unknown."))
                    continue
                if member_id and member_id != mid:
                    results.append(errors.FencedInstanceId(
                        f"Static member {member_id} with instance id {instance_id} was fenced by member {mid}."))
                    continue
            member = group.members.get(mid or "")
            if member is None:
                results.append(errors.UnknownMemberId(f"Member {mid} is not a member of group {group.group_id}."))
                continue
            notice(log, "group %s: member %s left the consumer group", group.group_id, mid)
            self.consumer.remove_member(group, member, records, now)
            results.append(None)
        self.consumer.write(group.group_id, group, before, records, None, None)
        self.maybe_downgrade(group)
        return results

    @staticmethod
    def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None,
                        generation: int) -> ConsumerMember:
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is None:
                raise errors.UnknownMemberId(f"Instance id {instance_id} is unknown.")
            if known != member_id:
                raise errors.FencedInstanceId(
                    f"Static member {member_id} with instance id {instance_id} was fenced by member {known}.")
        member = group.members.get(member_id)
        if member is None:
            raise errors.UnknownMemberId(f"Member {member_id} is not a member of group {group.group_id}.")
        if member.classic is None:
            raise errors.UnknownMemberId(f"Member {member_id} does not use the classic protocol.")
        if generation != member.member_epoch:
            raise errors.IllegalGeneration(
                f"The received generation id {generation} does not match the expected member epoch "
                f"{member.member_epoch}.")
        return member

    @staticmethod
    def _classic_protocols(group: ConsumerGroup, exclude: str) -> set[str] | None:
        """The protocols every classic member (but ``exclude``) supports; None if there is none."""
        sets = [{n for n, _ in m.classic.supported_protocols} for mid, m in group.members.items()
                if m.classic is not None and mid != exclude]
        return set.intersection(*sets) if sets else None
