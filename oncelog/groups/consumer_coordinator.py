"""The KIP-848 consumer group coordinator: ConsumerGroupHeartbeat (join, heartbeat, leave),
ConsumerGroupDescribe, the member-epoch checks of offset commits and fetches, session and
rebalance timers, and replay of the groups' records. Sans-IO, as the classic coordinator: time
from an injected ``clock()``, durable effects through ``persist``, topics through ``topics()``.

Kafka's GroupMetadataManager.consumerGroupHeartbeat, step by step (:meth:`heartbeat`):

1. Check the request (a group id; per member epoch what must be set; a known assignor; a regex
   RE2 accepts).
2. A leave (epoch -1, or -2 for a static member that will be back): remove the member and bump
   the group epoch (-2 keeps the static member and its partitions until its session expires).
3. The group: created by a join (epoch 0); an empty classic group with the id is converted, a
   classic group with members is GROUP_ID_NOT_FOUND (oncelog mixes no protocols in one group).
4. The member: a new one (epoch 0), a static member taking over its instance id (only from one
   that left with epoch -2: UNRELEASED_INSTANCE_ID otherwise), or a known one whose epoch must be
   its current one or, if its last answer was lost, the previous one (FENCED_MEMBER_EPOCH).
5. Its subscription and metadata are updated; the group's regexes are resolved again when
   needed (:meth:`_maybe_resolve_regexes`: only to topics the heartbeating member's principal
   may DESCRIBE); a subscription change, or a change of the subscribed topics' partitions,
   bumps the group epoch.
6. If the group epoch is ahead of the assignment epoch, the target assignment is computed again
   by the group's assignor (``uniform`` or ``range``).
7. The member is reconciled one step towards its target (:func:`next_member_state`).
8. Its session restarts; the answer carries its epoch and, when it changed or the request was a
   full one, its assignment.

Every change is recorded as Kafka's ``__consumer_offsets`` records (member metadata, group
epoch, target assignment, current assignment: :mod:`oncelog.groups.consumer_records`); the answer
is sent once they are durable. If they are not, the group is put back as it was before the
request (a snapshot) and the member is answered NOT_COORDINATOR (a storage error at the edge).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import uuid
from dataclasses import dataclass
from typing import Callable, Mapping

from .. import errors
from ..config.settings import GroupConfig
from ..errors import KafkaError
from ..notices import notice
from . import assignors as asg
from . import consumer_records as cr
from . import topic_regex
from .consumer_state import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    FencedMemberEpochError,
    MemberState,
    Partitions,
    TopicId,
    freeze,
    member_tombstones,
    next_member_state,
)
from . import classic_members as classic
from .state import Group, JoinResult, Persist, SyncResult

log = logging.getLogger("oncelog.groups")

# topics(): every topic now, name -> (topic id, partition count).
Topics = Callable[[], Mapping[str, tuple[TopicId, int]]]
Record = tuple[bytes, bytes | None]
# A per-partition offset-commit check: (topic name, partition) -> None or why not.
PartitionCheck = Callable[[str, int], "KafkaError | None"]
# describable(names): those of the topic names the principal of the request at hand may DESCRIBE
# (KafkaApis' filterByAuthorized). A regex resolves only to topics its resolving member's
# principal may describe (Kafka's TopicRegexResolver.filterTopicDescribeAuthorizedTopics).
Describable = Callable[[frozenset[str]], "set[str] | frozenset[str]"]


def every_topic_describable(names: frozenset[str]) -> frozenset[str]:
    """The :data:`Describable` of a broker without an authorizer: every topic."""
    return names


# Kafka's group.consumer.regex.refresh.interval.ms default (10 minutes; not configurable here):
# regexes are resolved again this long after their last resolution even if no topic was created
# meanwhile, so ACLs granted or removed since are taken into account.
REGEX_REFRESH_INTERVAL_MS = 600_000


@dataclass(frozen=True)
class HeartbeatResult:
    error: KafkaError | None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None  # None: not sent (unchanged)


def new_group(group_id: str, now: int, offsets=None) -> ConsumerGroup:
    """A new group at epoch 1 with an empty target assignment at epoch 1, as Kafka 4.4 makes them
    (KAFKA-20268): the first computed assignment is epoch 2, and a member joining reconciles
    towards epoch 1 meanwhile."""
    return ConsumerGroup(group_id, group_epoch=1, assignment_epoch=1, offsets={} if offsets is None else offsets,
                         state_timestamp_ms=now)


def new_member_id() -> str:
    """A member id as Kafka makes them (Uuid.randomUuid().toString(): 22 URL-safe base64 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ConsumerGroupCoordinator:
    """Consumer groups live in ``groups`` beside classic ones (one namespace of group ids, as in
    Kafka); ``groups`` is the classic coordinator's dict, shared."""

    def __init__(self, groups: dict, clock: Callable[[], int], persist: Persist, config: GroupConfig,
                 topics: Topics, group_configs: Callable[[str], Mapping[str, int]] | None = None) -> None:
        """``group_configs(group_id)``: the group's own configs (Kafka's GROUP config resource:
        consumer.session.timeout.ms, consumer.heartbeat.interval.ms,
        consumer.assignment.interval.ms), each over the broker's group.consumer.* one."""
        self.groups = groups
        self.clock = clock
        self.persist = persist
        self.config = config
        self.topics = topics
        self.group_configs = group_configs or (lambda group_id: {})
        # Set by the classic coordinator: takes over a consumer group left with classic members.
        self.on_downgrade: Callable[[ConsumerGroup], None] | None = None
        self.assignors = {name: asg.ASSIGNORS[name] for name in config.consumer_assignors}
        self._regex_cache: dict[str, Callable[[str], bool]] = {}
        self._topic_names: frozenset[str] = frozenset()  # the last set of topic names seen, shared

    # ------------------------------------------------------------------ ConsumerGroupHeartbeat

    def heartbeat(self, *, group_id: str, member_id: str, member_epoch: int, instance_id: str | None,
                  rack_id: str | None, rebalance_timeout_ms: int, client_id: str, client_host: str,
                  subscribed_topic_names: tuple[str, ...] | None, subscribed_topic_regex: str | None,
                  server_assignor: str | None, owned: Partitions | None, api_version: int,
                  respond: Callable[[HeartbeatResult], None],
                  describable: Describable = every_topic_describable) -> None:
        """ConsumerGroupHeartbeat; ``respond`` is called once (after the records are durable).
        ``describable``: the topics the member's principal may DESCRIBE, which are all the
        group's regexes can resolve to if this heartbeat resolves them (the API layer passes its
        principal's; the default, every topic, is a broker's without an authorizer)."""
        try:
            self._check_request(group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout_ms,
                                subscribed_topic_names, subscribed_topic_regex, server_assignor, owned,
                                api_version)
        except KafkaError as exc:
            return respond(HeartbeatResult(exc, member_id, member_epoch))
        if member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(group_id, member_id, member_epoch, instance_id, respond)
        now = self.clock()
        records: list[Record] = []
        existing = self.groups.get(group_id)
        before = existing.snapshot() if isinstance(existing, ConsumerGroup) else existing
        try:
            group = self._group_for_heartbeat(group_id, member_epoch == JOIN_GROUP_MEMBER_EPOCH, records, now)
            if not member_id:
                member_id = new_member_id()  # v0: the coordinator names a new member
            if (len(group.members) >= self.config.consumer_max_size and member_id not in group.members
                    and not (instance_id is not None and instance_id in group.static_members)):
                raise errors.GroupMaxSizeReached(
                    f"The consumer group has reached its maximum capacity of {self.config.consumer_max_size} "
                    "members (group.consumer.max.size).")
            member = self._member_for_heartbeat(group, member_id, member_epoch, instance_id, owned, records, now)
            result = self._update_and_reconcile(group, member, member_epoch, instance_id, rack_id,
                                                rebalance_timeout_ms, client_id, client_host, subscribed_topic_names,
                                                subscribed_topic_regex, server_assignor, owned, records, now,
                                                describable)
        except KafkaError as exc:
            self._put_back(group_id, existing, before)
            return respond(HeartbeatResult(exc, member_id, member_epoch))
        self._write(group_id, existing, before, records, result, respond)
        return None

    def _check_request(self, group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout_ms,
                       names, regex, server_assignor, owned, api_version) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        def invalid(message: str) -> errors.InvalidRequest:
            return errors.InvalidRequest(message)
        if not group_id:
            raise invalid("GroupId can't be empty.")
        if instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if rack_id == "":
            raise invalid("RackId can't be empty.")
        if member_epoch > 0 or member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not member_id:
                raise invalid("MemberId can't be empty.")
        elif member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if api_version >= 1 and not member_id:
                raise invalid("MemberId can't be empty.")
            if rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if owned is None or owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if not names and not regex:
                raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
        elif member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not member_id:
                raise invalid("MemberId can't be empty.")
            if instance_id is None:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid("MemberEpoch is invalid.")
        if server_assignor is not None and server_assignor not in self.assignors:
            raise errors.UnsupportedAssignor(
                f"ServerAssignor {server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self.assignors)}.")
        if regex:
            self._regex(regex)  # raises InvalidRegularExpression

    def _regex(self, pattern: str) -> Callable[[str], bool]:
        matcher = self._regex_cache.get(pattern)
        if matcher is None:
            matcher = topic_regex.compile_topic_regex(pattern)
            if len(self._regex_cache) > 10_000:  # bounded: patterns come from clients
                self._regex_cache.clear()
            self._regex_cache[pattern] = matcher
        return matcher

    def _group_for_heartbeat(self, group_id: str, create: bool, records: list[Record], now: int) -> ConsumerGroup:
        """Step 3 (Kafka's getOrMaybeCreateConsumerGroup)."""
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and not group.dead:
            return group
        if group is None or group.is_dead():
            if not create:
                raise errors.GroupIdNotFound(f"Consumer group {group_id} not found.")
            group = self.groups[group_id] = new_group(group_id, now)
            return group
        # A classic group.
        if create and group.is_empty():
            notice(log, "group %s: the empty classic group is converted to a consumer group", group_id)
            records.extend(group.tombstones())
            converted = new_group(group_id, now, offsets=group.offsets)
            self.groups[group_id] = converted
            return converted
        if create and self._may_upgrade(group):
            return self._upgrade(group, records, now)
        raise errors.GroupIdNotFound(f"Group {group_id} is not a consumer group.")

    # ------------------------------------------------------------------ classic members (migration)

    def _may_upgrade(self, group: Group) -> bool:
        """Kafka's validateOnlineUpgrade: the policy allows it, the classic group is a Stable
        consumer-protocol group whose members' assignments parse, and it fits the size limit."""
        if self.config.consumer_migration_policy not in ("upgrade", "bidirectional"):
            return False
        from .state import GroupState
        if group.state is not GroupState.STABLE or group.protocol_type != "consumer":
            return False
        if len(group.members) >= self.config.consumer_max_size:
            return False
        return all(classic.parse_assignment(m.assignment) is not None and
                   classic.parse_subscription(m.metadata_for(group.protocol_name or "")) is not None
                   for m in group.members.values())

    def _upgrade(self, group: Group, records: list[Record], now: int) -> ConsumerGroup:
        """A classic group with members becomes a consumer group (Kafka's convertToConsumerGroup):
        each member keeps its assignment at the group's generation as its member epoch, which is
        also the group and assignment epoch; the members learn of the new group at their next
        heartbeat (REBALANCE_IN_PROGRESS once the group moves on) and rejoin as classic members of
        it."""
        notice(log, "group %s: classic group with %d member(s) at generation %d converted to a consumer group "
               "(group.consumer.migration.policy=%s)", group.group_id, len(group.members), group.generation,
               self.config.consumer_migration_policy)
        topics = self.topics()
        epoch = max(group.generation, 1)
        converted = ConsumerGroup(group.group_id, group_epoch=epoch, assignment_epoch=epoch, offsets=group.offsets,
                                  state_timestamp_ms=now)
        for m in group.members.values():
            _, subscribed, _ = classic.parse_subscription(m.metadata_for(group.protocol_name or ""))
            assigned = freeze(classic.by_id(classic.parse_assignment(m.assignment), topics))
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
        converted.subscription_metadata = self._subscription_metadata(converted)
        converted.metadata_hash = metadata_hash(converted.subscription_metadata)
        records.extend(group.tombstones())
        for m in converted.members.values():
            records.append(self._member_metadata_record(group.group_id, m))
        records.append(self._group_epoch_record(converted))
        for mid, target in converted.target.items():
            records.append(cr_record(cr.ConsumerGroupTargetAssignmentMemberKey(group.group_id, mid),
                                     cr.ConsumerGroupTargetAssignmentMemberValue(target)))
        records.append(cr_record(cr.ConsumerGroupTargetAssignmentMetadataKey(group.group_id),
                                 cr.ConsumerGroupTargetAssignmentMetadataValue(epoch)))
        for m in converted.members.values():
            records.append(self._current_assignment_record(group.group_id, m))
        converted.update_state(now)
        self.groups[group.group_id] = converted
        return converted

    def classic_join(self, group: ConsumerGroup, *, member_id: str, instance_id: str | None, client_id: str,
                     client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                     protocols: list[tuple[str, bytes]], require_known_member_id: bool,
                     respond: Callable[[JoinResult], None],
                     describable: Describable = every_topic_describable) -> None:
        """JoinGroup of a classic-protocol consumer into a consumer group (Kafka's
        classicGroupJoinToConsumerGroup); ``respond`` once the records are durable. The group's
        regexes, if this join resolves them, resolve to what ``describable`` allows (the joining
        member's principal's, as Kafka)."""
        now = self.clock()
        gid = group.group_id

        def fail(error: KafkaError, mid: str = member_id) -> None:
            respond(JoinResult(error, member_id=mid))

        supported = self._classic_protocols(group, exclude=member_id)
        names = [n for n, _ in protocols]
        usable = [n for n in names if supported is None or n in supported]
        chosen = next(((n, md) for n, md in protocols if n in usable), None)
        parsed = classic.parse_subscription(chosen[1]) if chosen is not None else None
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
                member = self._replace_static(group, old, member_id, records, now)
        if member is None:
            notice(log, "group %s: member %s (client %s) joins the consumer group using the classic protocol", gid,
                   member_id, client_id)
            member = ConsumerMember(member_id, instance_id=instance_id)
        group.touch(member)
        member.classic = cr.ClassicMemberMetadata(session_timeout_ms, tuple(protocols))
        topics = self.topics()
        owned = classic.by_id(owned_by_name, topics)
        try:
            self._update_and_reconcile(group, member, -1, instance_id, None, rebalance_timeout_ms, client_id,
                                       client_host, subscribed, None, None, owned, records, now, describable)
        except KafkaError as exc:
            group.restore_from(before)
            return fail(exc)
        result = JoinResult(None, member.member_epoch, "consumer", chosen[0], "", member_id, ())
        self._write(gid, group, before, records, result, respond, error_result=lambda e: JoinResult(
            e, member_id=member_id))
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
        parsed = classic.parse_subscription(meta)
        version = parsed[0] if parsed is not None else 0
        member.session_deadline_ms = self.clock() + self.session_timeout_ms(member, group.group_id)
        respond(SyncResult(None, "consumer", name,
                           classic.encode_assignment(classic.by_name(member.assigned, self.topics()), version)))
        return None

    def classic_heartbeat(self, group: ConsumerGroup, generation: int, member_id: str,
                          instance_id: str | None) -> None:
        """Heartbeat of a classic member: raises REBALANCE_IN_PROGRESS while it is not reconciled
        to the group's epoch, so it rejoins (Kafka's classicGroupHeartbeatToConsumerGroup)."""
        member = self._classic_member(group, member_id, instance_id, generation)
        member.session_deadline_ms = self.clock() + self.session_timeout_ms(member, group.group_id)
        if not member.is_reconciled_to(group.group_epoch):
            raise errors.RebalanceInProgress(
                f"group {group.group_id!r} is rebalancing: member {member_id!r} must rejoin")

    def classic_leave(self, group: ConsumerGroup, members: list[tuple[str, str | None]]) -> list[KafkaError | None]:
        """LeaveGroup of classic members (each removed as a leave, epoch -1)."""
        now = self.clock()
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
            self._remove_member(group, member, records, now)
            results.append(None)
        self._write(group.group_id, group, before, records, None, None)
        self._maybe_downgrade(group)
        return results

    def _maybe_downgrade(self, group: ConsumerGroup) -> None:
        """Kafka's validateOnlineDowngrade: once the last consumer-protocol member is gone and
        classic members remain, the group becomes a classic group again (policy downgrade or
        bidirectional, within group.max.size); the classic coordinator takes it over
        (``on_downgrade``) and its members rejoin."""
        if (self.on_downgrade is None or group.dead or not group.members
                or self.config.consumer_migration_policy not in ("downgrade", "bidirectional")
                or len(group.members) > self.config.max_size
                or any(m.classic is None for m in group.members.values())
                or self.groups.get(group.group_id) is not group):
            return
        notice(log, "group %s: its last consumer-protocol member is gone; the group with %d classic member(s) is "
               "converted to a classic group", group.group_id, len(group.members))
        self.on_downgrade(group)

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
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

    def _member_for_heartbeat(self, group: ConsumerGroup, member_id: str, member_epoch: int,
                              instance_id: str | None, owned: Partitions | None, records: list[Record],
                              now: int) -> ConsumerMember:
        """Step 4: the member this heartbeat is from (new, taking over, or known and not fenced)."""
        joining = member_epoch == JOIN_GROUP_MEMBER_EPOCH
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise errors.UnknownMemberId(f"Member {member_id} is not a member of group {group.group_id}.")
                notice(log, "group %s: member %s joins the consumer group", group.group_id, member_id)
                return ConsumerMember(member_id)
            if joining:
                return self._rejoin(group, member, records, now)
            self._check_epoch(member, member_epoch, owned)
            return member
        known_id = group.static_members.get(instance_id)
        known = group.members.get(known_id) if known_id is not None else None
        if joining:
            if known is None:
                notice(log, "group %s: static member %s with instance id %s joins the consumer group",
                       group.group_id, member_id, instance_id)
                return ConsumerMember(member_id, instance_id=instance_id)
            if known.member_id == member_id:
                return self._rejoin(group, known, records, now)
            if known.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise errors.UnreleasedInstanceId(
                    f"Static member {member_id} with instance id {instance_id} cannot join the group because the "
                    f"instance id is owned by {known.member_id} member.")
            return self._replace_static(group, known, member_id, records, now)
        if known is None:
            raise errors.UnknownMemberId(f"Instance id {instance_id} is unknown.")
        if known.member_id != member_id:
            raise errors.FencedInstanceId(
                f"Static member {member_id} with instance id {instance_id} was fenced by member {known.member_id}.")
        self._check_epoch(known, member_epoch, owned)
        return known

    @staticmethod
    def _check_epoch(member: ConsumerMember, epoch: int, owned: Partitions | None) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: the member's epoch, or its previous one
        if it owns no more than its assignment (the answer with the new epoch was lost)."""
        if epoch > member.member_epoch:
            raise errors.FencedMemberEpoch(
                f"The consumer group member has a greater member epoch ({epoch}) than the one known by the group "
                f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")
        if epoch < member.member_epoch:
            subset = owned is not None and all(ps <= member.assigned.get(t, frozenset()) for t, ps in owned.items())
            if epoch != member.previous_member_epoch or not subset:
                raise errors.FencedMemberEpoch(
                    f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the "
                    f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and "
                    "rejoin.")

    def _rejoin(self, group: ConsumerGroup, member: ConsumerMember, records: list[Record],
                now: int) -> ConsumerMember:
        """A known member joins again with epoch 0 (KIP-1082: it keeps its member id after it was
        fenced, or its answer to an earlier join was lost): it gave up every partition, so it
        starts over at epoch 0 owning nothing; its target is unchanged."""
        if member.member_epoch == 0 and not member.assigned and not member.pending_revocation:
            return member
        notice(log, "group %s: member %s rejoins (it was at epoch %d); it owns nothing now", group.group_id,
               member.member_id, member.member_epoch)
        group.touch(member)
        member.member_epoch = member.previous_member_epoch = 0
        member.state = MemberState.STABLE
        member.assigned, member.pending_revocation, member.partition_epochs = {}, {}, {}
        member.rebalance_deadline_ms = None
        records.append(self._current_assignment_record(group.group_id, member))
        return member

    def _replace_static(self, group: ConsumerGroup, old: ConsumerMember, member_id: str, records: list[Record],
                        now: int) -> ConsumerMember:
        """A static member back within its session (it left with epoch -2) takes over its old
        member's subscription, target and assignment under its new member id (Kafka's replaceMember):
        no rebalance."""
        notice(log, "group %s: static member with instance id %s rejoins; member %s replaces %s", group.group_id,
               old.instance_id, member_id, old.member_id)
        new = ConsumerMember(member_id, instance_id=old.instance_id, rack_id=old.rack_id, client_id=old.client_id,
                             client_host=old.client_host, subscribed_topic_names=old.subscribed_topic_names,
                             subscribed_topic_regex=old.subscribed_topic_regex,
                             rebalance_timeout_ms=old.rebalance_timeout_ms, server_assignor=old.server_assignor,
                             member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE,
                             assigned=dict(old.assigned), pending_revocation={},
                             partition_epochs={tp: e for tp, e in old.partition_epochs.items()
                                               if tp[1] in old.assigned.get(tp[0], ())})
        target = group.target.pop(old.member_id, {})
        del group.members[old.member_id]
        records += member_tombstones(group.group_id, old.member_id)
        group.members[member_id] = new
        group.static_members[new.instance_id] = member_id
        group.target[member_id] = target
        records.append(self._member_metadata_record(group.group_id, new))
        records.append(cr_record(cr.ConsumerGroupTargetAssignmentMemberKey(group.group_id, member_id),
                                 cr.ConsumerGroupTargetAssignmentMemberValue(target)))
        records.append(self._current_assignment_record(group.group_id, new))
        return new

    def _update_and_reconcile(self, group: ConsumerGroup, member: ConsumerMember, member_epoch: int,
                              instance_id, rack_id, rebalance_timeout_ms, client_id, client_host, names, regex,
                              server_assignor, owned: Partitions | None, records: list[Record],
                              now: int, describable: Describable) -> HeartbeatResult:
        """Steps 5 to 8."""
        gid = group.group_id
        group.touch(member)
        old_subscription, old_metadata = member.subscription(), member.metadata()
        old_assigned = member.assigned
        new_member = member.member_id not in group.members
        # Step 5. The member's metadata and subscription.
        if instance_id is not None:
            member.instance_id = instance_id
        if rack_id is not None:
            member.rack_id = rack_id
        if rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if server_assignor is not None:
            member.server_assignor = server_assignor
        if names is not None:
            member.subscribed_topic_names = tuple(names)
        if regex is not None:
            member.subscribed_topic_regex = regex or None
        member.client_id, member.client_host = client_id, client_host
        group.members[member.member_id] = member
        if member.instance_id is not None:
            group.static_members[member.instance_id] = member.member_id
        bump = new_member or member.subscription() != old_subscription
        if bump:
            group.subscriptions_changed()
        if new_member or member.metadata() != old_metadata:
            records.append(self._member_metadata_record(gid, member))
        self._maybe_resolve_regexes(group, describable, records, now)
        metadata = self._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            group.metadata_hash = metadata_hash(metadata)
            bump = True
        if bump:
            group.group_epoch += 1
            records.append(self._group_epoch_record(group))
            notice(log, "group %s: group epoch bumped to %d", gid, group.group_epoch)
        # Step 6. The target assignment, at most once per group.consumer.assignment.interval.ms
        # (KIP-1263): meanwhile members reconcile towards the current one.
        if group.group_epoch > group.assignment_epoch:
            self._maybe_update_target(group, records, now)
        # Step 7. Reconcile the member.
        if not member.is_reconciled_to(group.assignment_epoch):
            owners = group.partition_epochs()
            mine = {(t, p) for parts in (member.assigned, member.pending_revocation) for t, ps in parts.items()
                    for p in ps}

            def owner_epoch(t: TopicId, p: int) -> int:
                # A partition this member owns itself is not "taken" (Kafka asks the same).
                return -1 if (t, p) in mine else owners.get((t, p), -1)

            try:
                step = next_member_state(member, group.assignment_epoch, group.target.get(member.member_id, {}),
                                         owner_epoch, owned)
            except FencedMemberEpochError as exc:
                raise errors.FencedMemberEpoch(str(exc)) from None
            if (step.state, step.member_epoch, step.assigned, step.pending_revocation) != (
                    member.state, member.member_epoch, member.assigned, member.pending_revocation):
                member.apply(step)
                records.append(self._current_assignment_record(gid, member))
                if member.state is MemberState.UNREVOKED_PARTITIONS and member.classic is None:
                    member.rebalance_deadline_ms = now + max(member.rebalance_timeout_ms, 0)
                else:
                    member.rebalance_deadline_ms = None
        # Step 8. The session; the answer. (Without records nothing changed, nor did the state.)
        member.session_deadline_ms = now + self.session_timeout_ms(member, group.group_id)
        if records:
            group.update_state(now)
        full = member_epoch == JOIN_GROUP_MEMBER_EPOCH or (
            rebalance_timeout_ms != -1 and names is not None and owned is not None)
        send = full or member.assigned != old_assigned
        return HeartbeatResult(None, member.member_id, member.member_epoch,
                               self.setting(gid, "heartbeat.interval.ms"), member.assigned if send else None)

    def setting(self, group_id: str, name: str) -> int:
        """A group.consumer.* setting for ``group_id``: its group config (``consumer.<name>``)
        or the broker's."""
        own = self.group_configs(group_id).get(f"consumer.{name}")
        if own is not None:
            return int(own)
        return getattr(self.config, "consumer_" + name.replace(".", "_").removesuffix("_ms") + "_ms")

    def session_timeout_ms(self, member: ConsumerMember, group_id: str = "") -> int:
        """A classic member's own session timeout (its JoinGroup's), else the group's."""
        return member.classic.session_timeout_ms if member.classic is not None \
            else self.setting(group_id, "session.timeout.ms")

    def _subscription_metadata(self, group: ConsumerGroup) -> dict[str, tuple[TopicId, int]]:
        """The subscribed topics that exist, by name or through a regex as last resolved (an
        unresolved regex: none), with their ids and partitions."""
        topics = self.topics()
        subscribed, regexes = group.subscriptions()
        names = {n for n in subscribed if n in topics}
        for regex in regexes:
            names.update(n for n in group.resolved_regexes.get(regex, ()) if n in topics)
        return {n: topics[n] for n in sorted(names)}

    def _member_topics(self, group: ConsumerGroup, member: ConsumerMember) -> frozenset[TopicId]:
        meta = group.subscription_metadata
        ids = {meta[n][0] for n in member.subscribed_topic_names if n in meta}
        if member.subscribed_topic_regex:
            ids.update(meta[n][0] for n in group.resolved_regexes.get(member.subscribed_topic_regex, ())
                       if n in meta)
        return frozenset(ids)

    # ------------------------------------------------------------------ regexes (KIP-848)

    def _maybe_resolve_regexes(self, group: ConsumerGroup, describable: Describable, records: list[Record],
                               now: int) -> None:
        """Kafka's maybeUpdateRegularExpressions and TopicRegexResolver, at a member's heartbeat.

        Every regex some member subscribes to is resolved again, all of them at once, when one
        of them is unresolved (a member brought it; nobody else subscribes to it), when a topic
        was created since the last resolution, or :data:`REGEX_REFRESH_INTERVAL_MS` after it. A
        regex resolves to the topics whose whole name it matches (internal topics too) that
        ``describable`` — the heartbeating member's principal — may DESCRIBE: resolutions are
        the group's, shared by every member subscribing to the regex, and made in the context of
        the member whose heartbeat made them, as in Kafka 4.4 (a member joining with a regex
        another member resolved gets that resolution until the next one). A regex nobody
        subscribes to any more is forgotten. Changes are recorded (type 16, a tombstone for a
        forgotten regex); the caller's metadata comparison bumps the group epoch if the
        subscribed topics changed.

        Not as in Kafka: resolution is synchronous (Kafka's is asynchronous, for the next
        heartbeat) and a created topic is picked up at the next heartbeat (Kafka waits at least
        10 s between resolutions).
        """
        _, regexes = group.subscriptions()
        resolved = group.resolved_regexes
        gone = [r for r in resolved if r not in regexes]
        topics = None
        stale = any(r not in resolved for r in regexes)
        if regexes and not stale:
            last = group.regexes_resolved_ms
            stale = last is None or now - last >= REGEX_REFRESH_INTERVAL_MS
            if not stale:
                topics = self.topics()
                seen = group.regexes_resolved_against
                stale = seen is None or any(n not in seen for n in topics)
        if not stale and not gone:
            return
        kept = {r: t for r, t in resolved.items() if r in regexes}
        for regex in gone:
            records.append((cr.encode_consumer_key(cr.ConsumerGroupRegularExpressionKey(group.group_id, regex)), None))
        if stale:
            topics = self.topics() if topics is None else topics
            matched = {r: self._matching(r, topics) for r in regexes}
            candidates = frozenset().union(*matched.values())
            allowed = describable(candidates) if candidates else frozenset()
            for regex in sorted(regexes):
                names = frozenset(matched[regex] & allowed)
                if resolved.get(regex) != names:
                    records.append(cr_record(cr.ConsumerGroupRegularExpressionKey(group.group_id, regex),
                                             cr.ConsumerGroupRegularExpressionValue(tuple(sorted(names)), -1, now)))
                kept[regex] = names
            group.regexes_resolved_ms, group.regexes_resolved_against = now, self._names(topics)
        group.resolved_regexes = kept

    def _matching(self, regex: str, topics) -> frozenset[str]:
        """The topic names ``regex`` matches in full; none for a regex that does not compile
        (Kafka logs and ignores it: the heartbeat that brought it was refused)."""
        try:
            matches = self._regex(regex)
        except errors.InvalidRegularExpression:
            return frozenset()
        return frozenset(n for n in topics if matches(n))

    def _names(self, topics) -> frozenset[str]:
        """The topic names as a frozenset, one object while they stay the same (so the groups
        resolved against them share it)."""
        if len(topics) != len(self._topic_names) or any(n not in self._topic_names for n in topics):
            self._topic_names = frozenset(topics)
        return self._topic_names

    def assignor_name(self, group: ConsumerGroup) -> str:
        """The assignor most members ask for (Kafka's ConsumerGroup.computePreferredServerAssignor),
        else the first of group.consumer.assignors."""
        votes: dict[str, int] = {}
        for m in group.members.values():
            if m.server_assignor in self.assignors:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return next(iter(self.assignors))
        return max(sorted(votes), key=lambda a: votes[a])

    def _maybe_update_target(self, group: ConsumerGroup, records: list[Record], now: int) -> None:
        """Compute the target now if the interval since the last one has passed; otherwise the
        first heartbeat after it does (as Kafka: no timer; the group is Assigning meanwhile)."""
        interval = self.setting(group.group_id, "assignment.interval.ms")
        last = group.last_assignment_ms
        if last is None or now - last >= interval:
            self._update_target(group, records, now)

    def _update_target(self, group: ConsumerGroup, records: list[Record], now: int) -> None:
        """Step 6: a new target assignment at the group epoch; changed members' targets are written."""
        specs = {mid: asg.MemberSpec(subscribed=self._member_topics(group, m),
                                     assigned=group.target.get(mid, {}), rack=m.rack_id, instance_id=m.instance_id)
                 for mid, m in group.members.items()}
        topic_specs = {tid: asg.TopicSpec(name, n) for name, (tid, n) in group.subscription_metadata.items()}
        new_target = {mid: freeze(a) for mid, a in
                      self.assignors[self.assignor_name(group)].assign(specs, topic_specs).items()}
        for mid in group.members:
            target = new_target.setdefault(mid, {})
            if mid not in group.target or group.target[mid] != target:
                records.append(cr_record(cr.ConsumerGroupTargetAssignmentMemberKey(group.group_id, mid),
                                         cr.ConsumerGroupTargetAssignmentMemberValue(target)))
        group.target = {mid: new_target[mid] for mid in group.members}
        group.assignment_epoch = group.group_epoch
        group.last_assignment_ms = now
        records.append(cr_record(cr.ConsumerGroupTargetAssignmentMetadataKey(group.group_id),
                                 cr.ConsumerGroupTargetAssignmentMetadataValue(group.assignment_epoch, now)))

    # ------------------------------------------------------------------ leave and fencing

    def _leave(self, group_id: str, member_id: str, member_epoch: int, instance_id: str | None,
               respond: Callable[[HeartbeatResult], None]) -> None:
        """Step 2 (Kafka's consumerGroupLeave)."""
        now = self.clock()
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or group.dead:
            return respond(HeartbeatResult(errors.GroupIdNotFound(f"Group {group_id} is not a consumer group."),
                                           member_id, member_epoch))
        before = group.snapshot()
        records: list[Record] = []
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                return respond(HeartbeatResult(errors.UnknownMemberId(
                    f"Member {member_id} is not a member of group {group_id}."), member_id, member_epoch))
            notice(log, "group %s: member %s left the consumer group", group_id, member_id)
            self._remove_member(group, member, records, now)
        else:
            known_id = group.static_members.get(instance_id)
            if known_id is None or known_id not in group.members:
                return respond(HeartbeatResult(errors.UnknownMemberId(f"Instance id {instance_id} is unknown."),
                                               member_id, member_epoch))
            if known_id != member_id:
                return respond(HeartbeatResult(errors.FencedInstanceId(
                    f"Static member {member_id} with instance id {instance_id} was fenced by member {known_id}."),
                    member_id, member_epoch))
            member = group.members[known_id]
            if member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                group.touch(member)
                # It will be back: it keeps its partitions until its session expires.
                notice(log, "group %s: static member %s with instance id %s left for now", group_id, member_id,
                       instance_id)
                member.update_member_epoch(LEAVE_GROUP_STATIC_MEMBER_EPOCH)
                # Its partitions' assignment epochs read as 0 now, as Kafka 4.4 writes them.
                member.partition_epochs = {(t, p): 0 for t, ps in member.assigned.items() for p in ps}
                member.pending_revocation = {}
                member.rebalance_deadline_ms = None
                records.append(self._current_assignment_record(group_id, member))
                group.update_state(now)
            else:
                notice(log, "group %s: static member %s with instance id %s left", group_id, member_id, instance_id)
                self._remove_member(group, member, records, now)
        self._write(group_id, group, before, records, HeartbeatResult(None, member_id, member_epoch), respond)
        self._maybe_downgrade(group)
        return None

    def _remove_member(self, group: ConsumerGroup, member: ConsumerMember, records: list[Record], now: int) -> None:
        """Kafka's consumerGroupFenceMember: the member and its target go, its partitions are free,
        the group epoch is bumped (the others get a new target at their next heartbeat)."""
        gid = group.group_id
        del group.members[member.member_id]
        group.subscriptions_changed()
        group.target.pop(member.member_id, None)
        if member.instance_id is not None and group.static_members.get(member.instance_id) == member.member_id:
            del group.static_members[member.instance_id]
        records += member_tombstones(gid, member.member_id)
        self._forget_unused_regexes(group, records)
        metadata = self._subscription_metadata(group)
        group.subscription_metadata, group.metadata_hash = metadata, metadata_hash(metadata)
        group.group_epoch += 1
        records.append(self._group_epoch_record(group))
        if not group.members:
            # Nothing to assign: the empty target is the new epoch's (Kafka writes both).
            group.target, group.assignment_epoch = {}, group.group_epoch
            records.append(cr_record(cr.ConsumerGroupTargetAssignmentMetadataKey(gid),
                                     cr.ConsumerGroupTargetAssignmentMetadataValue(group.assignment_epoch)))
        group.update_state(now)

    @staticmethod
    def _forget_unused_regexes(group: ConsumerGroup, records: list[Record]) -> None:
        """Kafka's maybeDeleteResolvedRegularExpressions: a resolved regex no member subscribes
        to any more is deleted (a tombstone of its record)."""
        _, regexes = group.subscriptions()
        gone = [r for r in group.resolved_regexes if r not in regexes]
        if gone:
            records.extend((cr.encode_consumer_key(cr.ConsumerGroupRegularExpressionKey(group.group_id, r)), None)
                           for r in gone)
            group.resolved_regexes = {r: t for r, t in group.resolved_regexes.items() if r in regexes}

    def _fence(self, group: ConsumerGroup, member: ConsumerMember, reason: str) -> None:
        """A timer fences a member: remove it, write it; nothing to answer."""
        notice(log, "group %s: member %s fenced from the group because %s", group.group_id, member.member_id, reason)
        before = group.snapshot()
        records: list[Record] = []
        self._remove_member(group, member, records, self.clock())
        self._write(group.group_id, group, before, records, None, None)
        self._maybe_downgrade(group)

    # ------------------------------------------------------------------ writing

    def _write(self, group_id: str, existing, before, records: list[Record], result, respond, *,
               error_result: Callable[[KafkaError], object] | None = None) -> None:
        """Persist ``records``; answer once durable. Not durable: the group as it was, an error."""
        if not records:
            if respond is not None:
                respond(result)
            return

        def stored(err: KafkaError | None) -> None:
            if err is not None:
                log.warning("group %s: records not written (%s); the group is put back as it was", group_id, err)
                self._put_back(group_id, existing, before)
                if respond is not None:
                    respond(error_result(err) if error_result is not None
                            else HeartbeatResult(err, result.member_id, result.member_epoch))
                return
            if respond is not None:
                respond(result)

        self.persist(group_id, records, stored)

    def _put_back(self, group_id: str, existing, before) -> None:
        current = self.groups.get(group_id)
        if existing is None:
            # The group was made by the request that failed.
            if isinstance(current, ConsumerGroup):
                self.groups.pop(group_id, None)
            return
        if isinstance(existing, ConsumerGroup):
            existing.restore_from(before)
        self.groups[group_id] = existing

    def _member_metadata_record(self, gid: str, m: ConsumerMember) -> Record:
        return cr_record(cr.ConsumerGroupMemberMetadataKey(gid, m.member_id), cr.ConsumerGroupMemberMetadataValue(
            instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names, subscribed_topic_regex=m.subscribed_topic_regex or "",
            rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
            classic_member_metadata=m.classic))

    @staticmethod
    def _current_assignment_record(gid: str, m: ConsumerMember) -> Record:
        return cr_record(cr.ConsumerGroupCurrentMemberAssignmentKey(gid, m.member_id),
                         cr.ConsumerGroupCurrentMemberAssignmentValue(
                             member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
                             state=int(m.state), assigned_partitions=m.assigned,
                             partitions_pending_revocation=m.pending_revocation,
                             assigned_epochs=_epochs(m.assigned, m.partition_epochs, m.member_epoch),
                             pending_revocation_epochs=_epochs(m.pending_revocation, m.partition_epochs,
                                                               m.member_epoch)))

    @staticmethod
    def _group_epoch_record(group: ConsumerGroup) -> Record:
        return cr_record(cr.ConsumerGroupMetadataKey(group.group_id),
                         cr.ConsumerGroupMetadataValue(group.group_epoch, group.metadata_hash))

    # ------------------------------------------------------------------ timers

    def tick(self) -> None:
        """Fence members whose session expired or who did not revoke within their rebalance
        timeout."""
        now = self.clock()
        for group in [g for g in self.groups.values() if isinstance(g, ConsumerGroup) and not g.dead]:
            for member in list(group.members.values()):
                if member.member_id not in group.members:
                    continue
                if member.session_deadline_ms <= now:
                    self._fence(group, member, "the member session expired "
                                f"({self.session_timeout_ms(member, group.group_id)} ms)")
                elif (member.rebalance_deadline_ms is not None and member.rebalance_deadline_ms <= now
                      and member.state is MemberState.UNREVOKED_PARTITIONS):
                    self._fence(group, member, f"it failed to revoke its partitions at epoch {member.member_epoch} "
                                f"within its rebalance timeout ({member.rebalance_timeout_ms} ms)")

    def next_deadline_ms(self) -> int | None:
        deadlines = []
        for g in self.groups.values():
            if isinstance(g, ConsumerGroup) and not g.dead:
                for m in g.members.values():
                    deadlines.append(m.session_deadline_ms)
                    if m.rebalance_deadline_ms is not None:
                        deadlines.append(m.rebalance_deadline_ms)
        return min(deadlines, default=None)

    # ------------------------------------------------------------------ offsets

    def validate_offset_commit(self, group: ConsumerGroup, member_id: str, member_epoch: int, *,
                               transactional: bool, api_version: int,
                               instance_id: str | None = None) -> PartitionCheck | None:
        """Kafka 4.4's ConsumerGroup.validateOffsetCommit: raises what refuses the whole commit;
        returns None if every partition may be committed, or a check per partition (KIP-1251:
        a commit at an older member epoch is accepted for a partition the member has owned since
        that epoch — a member committing what it consumed just before a rebalance is no zombie).

        1. Epoch < 0 to a group without members: an admin's (or a standalone consumer's) commit.
        2. A transactional commit without group metadata (epoch -1, no member): accepted (KIP-447's
           older producers).
        3. The member must exist (UNKNOWN_MEMBER_ID); a plain commit needs OffsetCommit v9+.
        4. Its current epoch: accepted; a newer one: STALE_MEMBER_EPOCH; an older one: per partition,
           which must be assigned or being revoked, at an assignment epoch not after it.
        """
        if member_epoch < 0 and not group.members:
            return None
        if transactional and member_epoch == -1 and not member_id and instance_id is None:
            return None
        member = group.members.get(member_id)
        if member is None:
            raise errors.UnknownMemberId(f"Member {member_id} is not a member of group {group.group_id}.")
        if not transactional and api_version < 9 and member.classic is None:
            raise errors.UnsupportedVersion(
                "OffsetCommit version 9 or above must be used by members using the consumer group protocol")
        # A classic member's generation is its member epoch; a mismatch is ILLEGAL_GENERATION.
        stale = errors.StaleMemberEpoch if member.classic is None else errors.IllegalGeneration
        if member_epoch == member.member_epoch:
            return None
        if member_epoch > member.member_epoch:
            raise stale(
                f"Received member epoch {member_epoch} is newer than current member epoch {member.member_epoch}.")
        topics = self.topics()

        def check(topic: str, partition: int) -> KafkaError | None:
            tid = topics.get(topic, (None, 0))[0]
            assigned_at = member.partition_epochs.get((tid, partition))
            if assigned_at is None:
                return stale(f"Partition {topic}-{partition} is not assigned or pending revocation for member.")
            if member_epoch < assigned_at:
                return stale(
                    f"Received member epoch {member_epoch} is older than assignment epoch {assigned_at} of "
                    f"partition {topic}-{partition}.")
            return None
        return check

    @staticmethod
    def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> None:
        """Kafka's ConsumerGroup.validateOffsetFetch: no member id and epoch -1 (admin) is accepted;
        a classic member's generation that is not its epoch is ILLEGAL_GENERATION, as in commits."""
        if member_id is None and member_epoch < 0:
            return
        member = group.members.get(member_id or "")
        if member is None:
            raise errors.UnknownMemberId(f"Member {member_id} is not a member of group {group.group_id}.")
        if member_epoch != member.member_epoch:
            if member.classic is not None:
                raise errors.IllegalGeneration(
                    f"The received generation id {member_epoch} does not match the expected member epoch "
                    f"{member.member_epoch}.")
            raise errors.StaleMemberEpoch(
                f"The received member epoch {member_epoch} does not match the expected member epoch "
                f"{member.member_epoch}.")

    # ------------------------------------------------------------------ replay

    def load(self, key, value) -> None:
        """Replay of one consumer-group record of ``__consumer_offsets`` (None: a tombstone)."""
        gid = key.group
        now = self.clock()
        group = self.groups.get(gid)
        if not isinstance(group, ConsumerGroup):
            if value is None:
                return
            # A consumer group's record after a classic group's (or none): the group is a
            # consumer group from here on; its offsets stay.
            group = ConsumerGroup(gid, offsets=group.offsets if isinstance(group, Group) else {},
                                  state_timestamp_ms=now)
            self.groups[gid] = group
        if isinstance(key, cr.ConsumerGroupMetadataKey):
            if value is None:
                # The group's last record (Kafka deletes it last): it is gone; offsets stay.
                if group.offsets:
                    self.groups[gid] = Group(gid, offsets=group.offsets, state_timestamp_ms=now)
                else:
                    self.groups.pop(gid, None)
                return
            group.group_epoch, group.metadata_hash = value.epoch, value.metadata_hash
        elif isinstance(key, cr.ConsumerGroupTargetAssignmentMetadataKey):
            group.assignment_epoch = value.assignment_epoch if value is not None else 0
        elif isinstance(key, cr.ConsumerGroupTargetAssignmentMemberKey):
            if value is None:
                group.target.pop(key.member_id, None)
            else:
                group.target[key.member_id] = freeze(value.topic_partitions)
        elif isinstance(key, cr.ConsumerGroupMemberMetadataKey):
            if value is None:
                member = group.members.pop(key.member_id, None)
                if member is not None and member.instance_id is not None:
                    group.static_members.pop(member.instance_id, None)
            else:
                member = group.members.setdefault(key.member_id, ConsumerMember(key.member_id))
                member.instance_id, member.rack_id = value.instance_id, value.rack_id
                member.client_id, member.client_host = value.client_id, value.client_host
                member.subscribed_topic_names = tuple(value.subscribed_topic_names)
                member.subscribed_topic_regex = value.subscribed_topic_regex or None
                member.rebalance_timeout_ms, member.server_assignor = value.rebalance_timeout_ms, value.server_assignor
                member.classic = value.classic_member_metadata
                member.session_deadline_ms = now + self.session_timeout_ms(member, group.group_id)
                if member.instance_id is not None:
                    group.static_members[member.instance_id] = key.member_id
        elif isinstance(key, cr.ConsumerGroupCurrentMemberAssignmentKey):
            member = group.members.get(key.member_id)
            if value is not None:
                if member is None:  # records of one member come together; tolerate any order
                    member = group.members[key.member_id] = ConsumerMember(key.member_id)
                    member.session_deadline_ms = now + self.session_timeout_ms(member, gid)
                member.member_epoch, member.previous_member_epoch = value.member_epoch, value.previous_member_epoch
                try:
                    member.state = MemberState(value.state)
                except ValueError:
                    member.state = MemberState.UNKNOWN
                member.assigned = freeze(value.assigned_partitions)
                member.pending_revocation = freeze(value.partitions_pending_revocation)
                # A partition without its epoch (written before Kafka 4.4) counts from the member's.
                default = max(member.member_epoch, 0)
                member.partition_epochs = {
                    (t, p): epochs.get(t, {}).get(p, default)
                    for parts, epochs in ((member.assigned, value.assigned_epochs),
                                          (member.pending_revocation, value.pending_revocation_epochs))
                    for t, ps in parts.items() for p in ps}
        elif isinstance(key, cr.ConsumerGroupRegularExpressionKey):
            # A regex as last resolved (already filtered by its resolving member's ACLs).
            rest = {r: t for r, t in group.resolved_regexes.items() if r != key.regex}
            if value is not None:
                rest[key.regex] = frozenset(value.topics)
            group.resolved_regexes = rest

    def finish_load(self) -> None:
        """After replay: what the groups were assigned against, their states, their timers
        (members must heartbeat within a session timeout from now; a revocation under way gets
        its rebalance timeout again)."""
        now = self.clock()
        for group in [g for g in self.groups.values() if isinstance(g, ConsumerGroup)]:
            group.subscriptions_changed()
            group.subscription_metadata = self._subscription_metadata(group)
            if metadata_hash(group.subscription_metadata) != group.metadata_hash:
                # Topics changed while the broker was down: bumped at the next heartbeat.
                group.subscription_metadata = {}
            for m in group.members.values():
                m.session_deadline_ms = now + self.session_timeout_ms(m, group.group_id)
                if m.state is MemberState.UNREVOKED_PARTITIONS and m.classic is None:
                    m.rebalance_deadline_ms = now + max(m.rebalance_timeout_ms, 0)
            group.update_state(now)


def _epochs(parts: Partitions, epochs: Mapping[tuple[TopicId, int], int], member_epoch: int) -> dict:
    """Per-partition assignment epochs as the record holds them: topic -> {partition: epoch}."""
    out: dict[TopicId, dict[int, int]] = {}
    for t, ps in parts.items():
        out[t] = {p: epochs.get((t, p), max(member_epoch, 0)) for p in sorted(ps)}
    return out


def cr_record(key, value) -> Record:
    return cr.encode_consumer_key(key), cr.encode_consumer_value(value)


def metadata_hash(metadata: Mapping[str, tuple[TopicId, int]]) -> int:
    """A digest of the subscribed topics (names, ids, partition counts) the target was computed
    from, as a signed int64 (ConsumerGroupMetadataValue.metadata_hash; not Kafka's own hash: the
    value is only compared with itself after a restart)."""
    if not metadata:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for name, (tid, n) in sorted(metadata.items()):
        h.update(name.encode() + b"\0" + tid.bytes + n.to_bytes(4, "big"))
    return int.from_bytes(h.digest(), "big", signed=True)
