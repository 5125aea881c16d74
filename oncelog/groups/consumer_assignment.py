"""What a KIP-848 group is assigned: its members' subscriptions resolved to topics (names, and
regexes resolved to the topics the resolving member may DESCRIBE), and the target assignment
computed from them by the group's server-side assignor (steps 5 and 6 of
:meth:`~oncelog.groups.consumer_coordinator.ConsumerGroupCoordinator.heartbeat`). Sans-IO: topics
from an injected ``topics()``, a group's settings from ``setting(group_id, name)``; each change
is appended to the caller's ``records`` (the coordinator writes them with the rest of the
heartbeat's).

Invariants: the target is computed only at the group epoch, at most once per
``group.consumer.assignment.interval.ms`` (KIP-1263); a change of the subscribed topics' ids or
partitions shows as a new :func:`metadata_hash`, which the coordinator turns into a group-epoch
bump; a resolved regex is replaced, never changed in place.
"""

from __future__ import annotations

import hashlib
from typing import Callable, Mapping

from .. import errors
from . import assignors as asg
from . import consumer_records as cr
from . import topic_regex
from .records import encode_key
from .consumer_state import (
    ConsumerGroup,
    ConsumerMember,
    Record,
    TopicId,
    cr_record,
    freeze,
    target_epoch_record,
    target_member_record,
)

# topics(): every topic now, name -> (topic id, partition count).
Topics = Callable[[], Mapping[str, tuple[TopicId, int]]]
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


class ConsumerAssignment:
    """The subscriptions and target assignments of the coordinator's consumer groups: the
    assignors of ``group.consumer.assignors``, a cache of compiled regexes."""

    def __init__(self, topics: Topics, assignor_names, setting: Callable[[str, str], int]) -> None:
        self.topics = topics
        self.setting = setting
        self.assignors = {name: asg.ASSIGNORS[name] for name in assignor_names}
        self._regex_cache: dict[str, Callable[[str], bool]] = {}
        self._topic_names: frozenset[str] = frozenset()  # the last set of topic names seen, shared

    # ------------------------------------------------------------------ subscriptions

    def subscription_metadata(self, group: ConsumerGroup) -> dict[str, tuple[TopicId, int]]:
        """The subscribed topics that exist, by name or through a regex as last resolved (an
        unresolved regex: none), with their ids and partitions."""
        topics = self.topics()
        subscribed, regexes = group.subscriptions()
        names = {n for n in subscribed if n in topics}
        for regex in regexes:
            names.update(n for n in group.resolved_regexes.get(regex, ()) if n in topics)
        return {n: topics[n] for n in sorted(names)}

    @staticmethod
    def member_topics(group: ConsumerGroup, member: ConsumerMember) -> frozenset[TopicId]:
        meta = group.subscription_metadata
        ids = {meta[n][0] for n in member.subscribed_topic_names if n in meta}
        if member.subscribed_topic_regex:
            ids.update(meta[n][0] for n in group.resolved_regexes.get(member.subscribed_topic_regex, ())
                       if n in meta)
        return frozenset(ids)

    # ------------------------------------------------------------------ regexes (KIP-848)

    def regex(self, pattern: str) -> Callable[[str], bool]:
        """The compiled ``pattern``; raises InvalidRegularExpression if RE2 refuses it."""
        matcher = self._regex_cache.get(pattern)
        if matcher is None:
            matcher = topic_regex.compile_topic_regex(pattern)
            if len(self._regex_cache) > 10_000:  # bounded: patterns come from clients
                self._regex_cache.clear()
            self._regex_cache[pattern] = matcher
        return matcher

    def resolve_regexes(self, group: ConsumerGroup, describable: Describable, records: list[Record],
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
            records.append((encode_key(cr.ConsumerGroupRegularExpressionKey(group.group_id, regex)), None))
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

    @staticmethod
    def forget_unused_regexes(group: ConsumerGroup, records: list[Record]) -> None:
        """Kafka's maybeDeleteResolvedRegularExpressions: a resolved regex no member subscribes
        to any more is deleted (a tombstone of its record)."""
        _, regexes = group.subscriptions()
        gone = [r for r in group.resolved_regexes if r not in regexes]
        if gone:
            records.extend((encode_key(cr.ConsumerGroupRegularExpressionKey(group.group_id, r)), None)
                           for r in gone)
            group.resolved_regexes = {r: t for r, t in group.resolved_regexes.items() if r in regexes}

    def _matching(self, regex: str, topics) -> frozenset[str]:
        """The topic names ``regex`` matches in full; none for a regex that does not compile
        (Kafka logs and ignores it: the heartbeat that brought it was refused)."""
        try:
            matches = self.regex(regex)
        except errors.InvalidRegularExpression:
            return frozenset()
        return frozenset(n for n in topics if matches(n))

    def _names(self, topics) -> frozenset[str]:
        """The topic names as a frozenset, one object while they stay the same (so the groups
        resolved against them share it)."""
        if len(topics) != len(self._topic_names) or any(n not in self._topic_names for n in topics):
            self._topic_names = frozenset(topics)
        return self._topic_names

    # ------------------------------------------------------------------ the target assignment

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

    def maybe_update_target(self, group: ConsumerGroup, records: list[Record], now: int) -> None:
        """Compute the target now if the interval since the last one has passed; otherwise the
        first heartbeat after it does (as Kafka: no timer; the group is Assigning meanwhile)."""
        interval = self.setting(group.group_id, "assignment.interval.ms")
        last = group.last_assignment_ms
        if last is None or now - last >= interval:
            self.update_target(group, records, now)

    def update_target(self, group: ConsumerGroup, records: list[Record], now: int) -> None:
        """A new target assignment at the group epoch; changed members' targets are written."""
        specs = {mid: asg.MemberSpec(subscribed=self.member_topics(group, m),
                                     assigned=group.target.get(mid, {}), rack=m.rack_id, instance_id=m.instance_id)
                 for mid, m in group.members.items()}
        topic_specs = {tid: asg.TopicSpec(name, n) for name, (tid, n) in group.subscription_metadata.items()}
        new_target = {mid: freeze(a) for mid, a in
                      self.assignors[self.assignor_name(group)].assign(specs, topic_specs).items()}
        for mid in group.members:
            target = new_target.setdefault(mid, {})
            if mid not in group.target or group.target[mid] != target:
                records.append(target_member_record(group.group_id, mid, target))
        group.target = {mid: new_target[mid] for mid in group.members}
        group.assignment_epoch = group.group_epoch
        group.last_assignment_ms = now
        records.append(target_epoch_record(group.group_id, group.assignment_epoch, now))
