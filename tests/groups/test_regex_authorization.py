"""KIP-848 regex subscriptions and ACLs in the consumer coordinator, sans-IO as
test_consumer_coordinator.py drives it: a regex resolves only to the topics the resolving
member's principal may DESCRIBE (Kafka 4.4's TopicRegexResolver.filterTopicDescribeAuthorizedTopics),
here the heartbeat's ``describable``.

Invariants, as Kafka 4.4's GroupMetadataManager.maybeUpdateRegularExpressions:

- a regex resolves to the topics whose whole name it matches — internal ones included — minus
  those the heartbeating member's principal may not DESCRIBE;
- resolutions are the group's: every regex of the group is resolved at once, in the context of
  the member whose heartbeat resolves them (when a regex is new to the group, a topic was created
  since, or the refresh interval passed); a member joining with a regex already resolved shares
  that resolution until the next one;
- resolutions are written as type-16 records, replayed after a restart (no rebalance for it),
  and deleted (tombstones) when no member subscribes to the regex any more.
"""

from __future__ import annotations

import uuid

from oncelog.groups import consumer_records as cr
from oncelog.groups.consumer_coordinator import REGEX_REFRESH_INTERVAL_MS
from oncelog.groups.records import decode_key

from .test_consumer_coordinator import Harness, replay, subscription

T, U, V, OFFSETS = (uuid.UUID(int=i) for i in (1, 2, 3, 9))
TOPICS = {"t": (T, 2), "u": (U, 1), "__consumer_offsets": (OFFSETS, 3)}


def may(*allowed):
    """A principal's ``describable``: it may DESCRIBE ``allowed`` only."""
    return lambda names: set(names) & set(allowed)


def regex_records(h: Harness):
    """The type-16 records written so far: [(regex, topics or None for a tombstone)]."""
    out = []
    for _, records in h.written:
        for key, value in records:
            k = decode_key(key)
            if isinstance(k, cr.ConsumerGroupRegularExpressionKey):
                v = cr.decode_consumer_value(k, value) if value is not None else None
                out.append((k.regex, None if v is None else v.topics))
    return out


def assigned_topics(h: Harness, gid="g"):
    """Every topic id in the group's target assignment."""
    return {t for target in h.group(gid).target.values() for t in target}


def test_a_regex_resolves_only_to_topics_the_member_may_describe():
    """``.*`` from a principal that may describe ``t`` only: ``t`` is assigned, not ``u`` nor the
    internal ``__consumer_offsets`` (which a principal that may describe everything gets)."""
    h = Harness(topics=TOPICS)
    r = h.hb("a", 0, regex=".*", describable=may("t"))
    assert r.error is None and r.assignment == {T: frozenset({0, 1})}
    assert h.group().resolved_regexes == {".*": frozenset({"t"})}
    assert set(h.group().subscription_metadata) == {"t"}
    assert regex_records(h) == [(".*", ("t",))]
    # Nothing to describe: nothing assigned, and the heartbeat is not refused (as Kafka).
    r = h.hb("b", 0, regex=".*", group="nothing", describable=may())
    assert r.error is None and r.assignment == {}
    # Everything: the internal topic too (Kafka 4.4 leaves nothing out).
    r = h.hb("c", 0, regex=".*", group="admin", describable=may("t", "u", "__consumer_offsets"))
    assert set(r.assignment) == {T, U, OFFSETS}


def test_a_regex_resolved_in_one_members_context_is_shared_until_the_next_resolution():
    """Kafka 4.4's rule for a group whose members have different principals: the resolution is
    made at the heartbeat of the member that needs it, in that member's context, and shared."""
    h = Harness(topics=TOPICS)
    h.hb("alice", 0, regex="[tuv]", describable=may("t"))
    # bob may describe u too, but the regex is resolved already: he joins on alice's resolution.
    h.hb("bob", 0, regex="[tuv]", describable=may("t", "u"))
    assert h.group().resolved_regexes == {"[tuv]": frozenset({"t"})}
    assert assigned_topics(h) == {T}
    # A topic is created: the next heartbeat resolves again, in its member's context (bob's).
    h.topics["v"] = (V, 1)
    epoch = h.group().group_epoch
    h.hb("bob", h.group().members["bob"].member_epoch, describable=may("t", "u", "v"))
    assert h.group().resolved_regexes == {"[tuv]": frozenset({"t", "u", "v"})}
    assert h.group().group_epoch == epoch + 1 and assigned_topics(h) == {T, U, V}
    # No topic created, within the refresh interval: alice's heartbeat resolves nothing again.
    h.hb("alice", h.group().members["alice"].member_epoch, describable=may("t"))
    assert h.group().resolved_regexes == {"[tuv]": frozenset({"t", "u", "v"})}
    # After the interval, her heartbeat does, in her context.
    h.now += REGEX_REFRESH_INTERVAL_MS
    h.hb("alice", h.group().members["alice"].member_epoch, describable=may("t"))
    assert h.group().resolved_regexes == {"[tuv]": frozenset({"t"})}
    assert assigned_topics(h) == {T}


def test_a_new_regex_resolves_every_regex_of_the_group_in_the_joining_members_context():
    h = Harness(topics=TOPICS)
    h.hb("a", 0, regex="t|u", describable=may("t", "u"))
    h.hb("b", 0, regex="u", describable=may("t"))  # new to the group: both are resolved, in b's context
    assert h.group().resolved_regexes == {"t|u": frozenset({"t"}), "u": frozenset()}


def test_acls_granted_later_apply_at_the_refresh_interval():
    h = Harness(topics=TOPICS)
    r = h.hb("a", 0, regex="t", describable=may())
    assert r.assignment == {} and h.group().resolved_regexes == {"t": frozenset()}
    epoch = r.member_epoch
    # DESCRIBE granted on t: not before the regexes are resolved again (as Kafka).
    r = h.hb("a", epoch, {}, describable=may("t"))
    assert r.assignment is None and h.group().resolved_regexes == {"t": frozenset()}
    h.now += REGEX_REFRESH_INTERVAL_MS
    r = h.hb("a", epoch, {}, describable=may("t"))
    assert r.assignment == {T: frozenset({0, 1})}
    # Revoked again: at the next interval t leaves the assignment.
    h.now += REGEX_REFRESH_INTERVAL_MS
    r = h.hb("a", r.member_epoch, {T: frozenset({0, 1})}, describable=may())
    assert r.assignment == {} and h.group().resolved_regexes == {"t": frozenset()}


def test_resolutions_are_replayed_and_forgotten_with_the_last_member_subscribing():
    h = Harness(topics=TOPICS)
    h.hb("a", 0, regex=".*", describable=may("t"))
    h.hb("b", 0, names=("u",), describable=may("u"))
    fresh = replay(h)
    g, f = h.group(), fresh.groups["g"]
    assert f.resolved_regexes == {".*": frozenset({"t"})}
    assert (f.subscription_metadata, f.metadata_hash) == (g.subscription_metadata, g.metadata_hash)
    # After the restart the first heartbeat resolves again (in its context); the same answer
    # changes nothing: no regex record, no rebalance.
    h.coord = fresh
    epoch = f.group_epoch
    h.hb("a", f.members["a"].member_epoch, describable=may("t"))
    assert f.regexes_resolved_ms == h.now
    assert f.group_epoch == epoch and regex_records(h) == [(".*", ("t",))]
    # a leaves: nobody subscribes to ".*" any more; its record is deleted.
    h.hb("a", -1)
    assert f.resolved_regexes == {} and regex_records(h)[-1] == (".*", None)


def test_deleting_a_group_deletes_its_regexes():
    h = Harness(topics=TOPICS)
    h.hb("a", 0, regex=".*", describable=may("t"))
    tombstones = [decode_key(k) for k, v in h.group().tombstones() if v is None]
    assert cr.ConsumerGroupRegularExpressionKey("g", ".*") in tombstones
    assert isinstance(tombstones[-1], cr.ConsumerGroupMetadataKey)  # the group's record still last


def test_a_classic_member_joining_resolves_the_groups_regexes_in_its_own_context():
    """A classic-protocol JoinGroup into a consumer group (Kafka's classicGroupJoinToConsumerGroup)
    resolves the group's regexes when they need it, with the joining member's ACLs (the
    ``describable`` JoinGroup passes), as a heartbeat does."""
    h = Harness(topics=TOPICS)
    h.hb("a", 0, regex="[tuv]", describable=may("t", "u", "v"))
    assert h.group().resolved_regexes == {"[tuv]": frozenset({"t", "u"})}
    h.topics["v"] = (V, 1)  # created: the next join or heartbeat resolves again

    def join(member_id: str):
        got = []
        h.coord.join(group_id="g", member_id=member_id, group_instance_id=None, client_id="k", client_host="h",
                     session_timeout_ms=10_000, rebalance_timeout_ms=10_000, protocol_type="consumer",
                     protocols=[("range", subscription("t"))], require_known_member_id=True, respond=got.append,
                     describable=may("t"))
        return got[0]

    first = join("")  # KIP-394: MEMBER_ID_REQUIRED, nothing resolved yet
    assert h.group().resolved_regexes == {"[tuv]": frozenset({"t", "u"})}
    joined = join(first.member_id)
    assert joined.error is None, joined
    assert h.group().resolved_regexes == {"[tuv]": frozenset({"t"})}
