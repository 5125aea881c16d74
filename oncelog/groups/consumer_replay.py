"""Replay of consumer (KIP-848) groups' records of ``__consumer_offsets`` at start-up (Kafka's
GroupMetadataManager.replay): each record sets what it records, in log order
(:func:`load`); then :func:`finish_load` derives what is not stored (subscribed topics, states,
timers).

Invariants: replay restores, it does not transition (a member's state is the record's,
:meth:`~oncelog.groups.consumer_state.ConsumerMember.restore_from`); a group's last record is its
ConsumerGroupMetadata tombstone (Kafka deletes it last), where the group is forgotten but its
offsets, records of their own, stay; a consumer group's record after a classic group's makes the
group a consumer group (the migration's upgrade, or a classic group converted back).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import consumer_records as cr
from .consumer_assignment import metadata_hash
from .consumer_state import ConsumerGroup, ConsumerMember, MemberState, freeze
from .state import Group

if TYPE_CHECKING:
    from .consumer_coordinator import ConsumerGroupCoordinator


def load(coordinator: "ConsumerGroupCoordinator", key, value) -> None:
    """Replay of one consumer-group record of ``__consumer_offsets`` (None: a tombstone)."""
    groups = coordinator.groups
    gid = key.group
    now = coordinator.clock()
    group = groups.get(gid)
    if not isinstance(group, ConsumerGroup):
        if value is None:
            return
        # A consumer group's record after a classic group's (or none): the group is a
        # consumer group from here on; its offsets stay.
        group = ConsumerGroup(gid, offsets=group.offsets if isinstance(group, Group) else {},
                              state_timestamp_ms=now)
        groups[gid] = group
    if isinstance(key, cr.ConsumerGroupMetadataKey):
        if value is None:
            # The group's last record (Kafka deletes it last): it is gone; offsets stay.
            if group.offsets:
                groups[gid] = Group(gid, offsets=group.offsets, state_timestamp_ms=now)
            else:
                groups.pop(gid, None)
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
            member.session_deadline_ms = now + coordinator.session_timeout_ms(member, group.group_id)
            if member.instance_id is not None:
                group.static_members[member.instance_id] = key.member_id
    elif isinstance(key, cr.ConsumerGroupCurrentMemberAssignmentKey):
        member = group.members.get(key.member_id)
        if value is not None:
            if member is None:  # records of one member come together; tolerate any order
                member = group.members[key.member_id] = ConsumerMember(key.member_id)
                member.session_deadline_ms = now + coordinator.session_timeout_ms(member, gid)
            member.restore_from(value)
    elif isinstance(key, cr.ConsumerGroupRegularExpressionKey):
        # A regex as last resolved (already filtered by its resolving member's ACLs).
        rest = {r: t for r, t in group.resolved_regexes.items() if r != key.regex}
        if value is not None:
            rest[key.regex] = frozenset(value.topics)
        group.resolved_regexes = rest


def finish_load(coordinator: "ConsumerGroupCoordinator") -> None:
    """After replay: what the groups were assigned against, their states, their timers
    (members must heartbeat within a session timeout from now; a revocation under way gets
    its rebalance timeout again)."""
    now = coordinator.clock()
    for group in [g for g in coordinator.groups.values() if isinstance(g, ConsumerGroup)]:
        group.subscriptions_changed()
        group.subscription_metadata = coordinator.assignment.subscription_metadata(group)
        if metadata_hash(group.subscription_metadata) != group.metadata_hash:
            # Topics changed while the broker was down: bumped at the next heartbeat.
            group.subscription_metadata = {}
        for m in group.members.values():
            m.session_deadline_ms = now + coordinator.session_timeout_ms(m, group.group_id)
            if m.state is MemberState.UNREVOKED_PARTITIONS and m.classic is None:
                m.rebalance_deadline_ms = now + max(m.rebalance_timeout_ms, 0)
        group.update_state(now)
