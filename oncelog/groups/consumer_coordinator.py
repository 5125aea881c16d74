"""The KIP-848 consumer group coordinator: ConsumerGroupHeartbeat (join, heartbeat, leave), session
and rebalance timers. Sans-IO, as the
classic coordinator: time from an injected ``clock()``, durable effects through ``persist``,
topics through ``topics()``.

Kafka's GroupMetadataManager.consumerGroupHeartbeat, step by step (:meth:`heartbeat`):

1. Check the request (a group id; per member epoch what must be set; a known assignor; a regex
   RE2 accepts).
2. A leave (epoch -1, or -2 for a static member that will be back): remove the member and bump
   the group epoch (-2 keeps the static member and its partitions until its session expires).
3. The group: created by a join (epoch 0); a classic group with the id is converted if the
   migration allows it (:meth:`oncelog.groups.migration.Migration.upgrade`), else the answer is
   GROUP_ID_NOT_FOUND.
4. The member: a new one (epoch 0), a static member taking over its instance id (only from one
   that left with epoch -2: UNRELEASED_INSTANCE_ID otherwise), or a known one whose epoch must be
   its current one or, if its last answer was lost, the previous one (FENCED_MEMBER_EPOCH).
5. Its subscription and metadata are updated; the group's regexes are resolved again when
   needed (:meth:`~oncelog.groups.consumer_assignment.ConsumerAssignment.resolve_regexes`: only
   to topics the heartbeating member's principal may DESCRIBE); a subscription change, or a
   change of the subscribed topics' partitions, bumps the group epoch.
6. If the group epoch is ahead of the assignment epoch, the target assignment is computed again
   by the group's assignor (``uniform`` or ``range``;
   :meth:`~oncelog.groups.consumer_assignment.ConsumerAssignment.maybe_update_target`).
7. The member is reconciled one step towards its target (:func:`next_member_state`).
8. Its session restarts; the answer carries its epoch and, when it changed or the request was a
   full one, its assignment.

Every change is recorded as Kafka's ``__consumer_offsets`` records (member metadata, group
epoch, target assignment, current assignment: :mod:`oncelog.groups.consumer_records`); the answer
is sent once they are durable. If they are not, the group is put back as it was before the
request (a snapshot) and the member is answered NOT_COORDINATOR (a storage error at the edge).

Beside it: :mod:`.consumer_assignment` (subscriptions, regexes, the target assignment),
:mod:`.consumer_replay` (replay of the records at start-up), :mod:`.migration` (classic members
and conversions to and from classic groups), :mod:`.consumer_state` (the groups, members and
their state tables).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping

from .. import errors
from ..config.settings import GroupConfig
from ..errors import KafkaError
from ..notices import notice
from . import consumer_replay
from .consumer_assignment import (
    REGEX_REFRESH_INTERVAL_MS,  # noqa: F401 (imported from here by tests)
    ConsumerAssignment,
    Describable,
    Topics,
    every_topic_describable,
    metadata_hash,
)
from .consumer_state import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    FencedMemberEpochError,
    MemberState,
    Partitions,
    Record,
    TopicId,
    current_assignment_record,
    group_epoch_record,
    member_metadata_record,
    member_tombstones,
    new_group,
    new_member_id,
    next_member_state,
    target_epoch_record,
    target_member_record,
)
from .state import Persist

if TYPE_CHECKING:
    from .migration import Migration

log = logging.getLogger("oncelog.groups")

@dataclass(frozen=True)
class HeartbeatResult:
    error: KafkaError | None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None  # None: not sent (unchanged)


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
        self.assignment = ConsumerAssignment(topics, config.consumer_assignors, self.setting)
        self.assignors = self.assignment.assignors
        # Set by the classic coordinator, which owns both directions of the migration: converts
        # a classic group a heartbeat joins, and takes over a group left with classic members.
        self.migration: Migration | None = None
        # Group epoch bumps by a heartbeat, as Kafka's consumer-group-rebalance-count; read by oncelog.metrics.
        self.rebalances = 0

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
        # Step 1. The request itself.
        try:
            self._check_request(group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout_ms,
                                subscribed_topic_names, subscribed_topic_regex, server_assignor, owned,
                                api_version)
        except KafkaError as exc:
            return respond(HeartbeatResult(exc, member_id, member_epoch))
        # Step 2. A leave (:meth:`_leave`).
        if member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(group_id, member_id, member_epoch, instance_id, respond)
        now = self.clock()
        records: list[Record] = []
        existing = self.groups.get(group_id)
        before = existing.snapshot() if isinstance(existing, ConsumerGroup) else existing
        try:
            # Step 3. The group (:meth:`_group_for_heartbeat`).
            group = self._group_for_heartbeat(group_id, member_epoch == JOIN_GROUP_MEMBER_EPOCH, records, now)
            # Step 4. The member (:meth:`_member_for_heartbeat`), within group.consumer.max.size.
            if not member_id:
                member_id = new_member_id()  # v0: the coordinator names a new member
            if (len(group.members) >= self.config.consumer_max_size and member_id not in group.members
                    and not (instance_id is not None and instance_id in group.static_members)):
                raise errors.GroupMaxSizeReached(
                    f"The consumer group has reached its maximum capacity of {self.config.consumer_max_size} "
                    "members (group.consumer.max.size).")
            member = self._member_for_heartbeat(group, member_id, member_epoch, instance_id, owned, records, now)
            # Steps 5 to 8. Subscription, target, reconciliation, answer (:meth:`update_and_reconcile`).
            result = self.update_and_reconcile(group, member, member_epoch, instance_id, rack_id,
                                                rebalance_timeout_ms, client_id, client_host, subscribed_topic_names,
                                                subscribed_topic_regex, server_assignor, owned, records, now,
                                                describable)
        except KafkaError as exc:
            self._put_back(group_id, existing, before)
            return respond(HeartbeatResult(exc, member_id, member_epoch))
        self.write(group_id, existing, before, records, result, respond)
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
            self.assignment.regex(regex)  # raises InvalidRegularExpression

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
        # A classic group: converted if the migration allows it.
        if create and self.migration is not None:
            converted = self.migration.upgrade(group, records, now)
            if converted is not None:
                return converted
        raise errors.GroupIdNotFound(f"Group {group_id} is not a consumer group.")

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
            return self.replace_static(group, known, member_id, records, now)
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
        member.rejoin()
        records.append(current_assignment_record(group.group_id, member))
        return member

    def replace_static(self, group: ConsumerGroup, old: ConsumerMember, member_id: str, records: list[Record],
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
                             member_epoch=0, previous_member_epoch=0,  # STABLE, a new member
                             assigned=dict(old.assigned), pending_revocation={},
                             partition_epochs={tp: e for tp, e in old.partition_epochs.items()
                                               if tp[1] in old.assigned.get(tp[0], ())})
        target = group.target.pop(old.member_id, {})
        del group.members[old.member_id]
        records += member_tombstones(group.group_id, old.member_id)
        group.members[member_id] = new
        group.static_members[new.instance_id] = member_id
        group.target[member_id] = target
        records.append(member_metadata_record(group.group_id, new))
        records.append(target_member_record(group.group_id, member_id, target))
        records.append(current_assignment_record(group.group_id, new))
        return new

    def update_and_reconcile(self, group: ConsumerGroup, member: ConsumerMember, member_epoch: int,
                             instance_id, rack_id, rebalance_timeout_ms, client_id, client_host, names, regex,
                             server_assignor, owned: Partitions | None, records: list[Record],
                             now: int, describable: Describable) -> HeartbeatResult:
        """Steps 5 to 8, for a heartbeat or a classic member's JoinGroup (``member_epoch`` -1,
        :meth:`oncelog.groups.migration.Migration.classic_join`): records the changes in
        ``records``; raises a KafkaError (the caller puts the group back)."""
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
            records.append(member_metadata_record(gid, member))
        self.assignment.resolve_regexes(group, describable, records, now)
        metadata = self.assignment.subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            group.metadata_hash = metadata_hash(metadata)
            bump = True
        if bump:
            group.group_epoch += 1
            self.rebalances += 1
            records.append(group_epoch_record(group))
            notice(log, "group %s: group epoch bumped to %d", gid, group.group_epoch)
        # Step 6. The target assignment, at most once per group.consumer.assignment.interval.ms
        # (KIP-1263): meanwhile members reconcile towards the current one.
        if group.group_epoch > group.assignment_epoch:
            self.assignment.maybe_update_target(group, records, now)
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
                records.append(current_assignment_record(gid, member))
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

    def assignor_name(self, group: ConsumerGroup) -> str:
        return self.assignment.assignor_name(group)

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
            self.remove_member(group, member, records, now)
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
                records.append(current_assignment_record(group_id, member))
                group.update_state(now)
            else:
                notice(log, "group %s: static member %s with instance id %s left", group_id, member_id, instance_id)
                self.remove_member(group, member, records, now)
        self.write(group_id, group, before, records, HeartbeatResult(None, member_id, member_epoch), respond)
        self._maybe_downgrade(group)
        return None

    def remove_member(self, group: ConsumerGroup, member: ConsumerMember, records: list[Record], now: int) -> None:
        """Kafka's consumerGroupFenceMember: the member and its target go, its partitions are free,
        the group epoch is bumped (the others get a new target at their next heartbeat)."""
        gid = group.group_id
        del group.members[member.member_id]
        group.subscriptions_changed()
        group.target.pop(member.member_id, None)
        if member.instance_id is not None and group.static_members.get(member.instance_id) == member.member_id:
            del group.static_members[member.instance_id]
        records += member_tombstones(gid, member.member_id)
        self.assignment.forget_unused_regexes(group, records)
        metadata = self.assignment.subscription_metadata(group)
        group.subscription_metadata, group.metadata_hash = metadata, metadata_hash(metadata)
        group.group_epoch += 1
        records.append(group_epoch_record(group))
        if not group.members:
            # Nothing to assign: the empty target is the new epoch's (Kafka writes both).
            group.target, group.assignment_epoch = {}, group.group_epoch
            records.append(target_epoch_record(gid, group.assignment_epoch))
        group.update_state(now)

    def _maybe_downgrade(self, group: ConsumerGroup) -> None:
        """A member left: the group may become a classic group again
        (:meth:`oncelog.groups.migration.Migration.maybe_downgrade`)."""
        if self.migration is not None:
            self.migration.maybe_downgrade(group)

    def _fence(self, group: ConsumerGroup, member: ConsumerMember, reason: str) -> None:
        """A timer fences a member: remove it, write it; nothing to answer."""
        notice(log, "group %s: member %s fenced from the group because %s", group.group_id, member.member_id, reason)
        before = group.snapshot()
        records: list[Record] = []
        self.remove_member(group, member, records, self.clock())
        self.write(group.group_id, group, before, records, None, None)
        self._maybe_downgrade(group)

    # ------------------------------------------------------------------ writing

    def write(self, group_id: str, existing, before, records: list[Record], result, respond, *,
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

    # ------------------------------------------------------------------ replay

    def load(self, key, value) -> None:
        """Replay of one consumer-group record (:func:`oncelog.groups.consumer_replay.load`)."""
        consumer_replay.load(self, key, value)

    def finish_load(self) -> None:
        """After replay: states and timers (:func:`oncelog.groups.consumer_replay.finish_load`)."""
        consumer_replay.finish_load(self)
