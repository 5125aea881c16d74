"""The KIP-848 server-side assignors (:mod:`oncelog.groups.assignors`).

Three layers:

* tables of Kafka's own assignor tests (``UniformHomogeneousAssignmentBuilderTest``,
  ``UniformHeterogeneousAssignmentBuilderTest``, ``RangeAssignorTest``): the same inputs, and the
  same exact outputs Kafka asserts (Kafka 4.4's jar gives the same outputs for these inputs);
* hypothesis properties of every assignor: an entry per member, subscribed topics only, every
  partition of every subscribed topic exactly once, independence from dict order, idempotence
  (Kafka's ``testAssignmentReuse``), uniform's balance and minimal movement, range's ranges and
  co-partitioning;
* a 1000-member, 1000-partition group, which must simply complete with valid assignments.
"""

from __future__ import annotations

import base64
import random
import uuid
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oncelog.groups.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    MemberSpec,
    RangeAssignor,
    TopicSpec,
    UniformAssignor,
    _UniformHeterogeneous,
    member_id_order,
    range_member_order,
    topic_id_order,
)


def kafka_uuid(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``: URL-safe base64 of the 16 bytes, unpadded."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


# The topic ids of Kafka's assignor tests.
T1 = kafka_uuid("T1-A4s3VTwiI5CTbEp6POw")
T2 = kafka_uuid("T2-B4s3VTwiI5YHbPp6YUe")
T3 = kafka_uuid("T3-CU8fVTLCz5YMkLoDQsa")
T4 = kafka_uuid("T4-Tw9fVTLCz5HbPp6YQsa")
NAMES = {T1: "topic1", T2: "topic2", T3: "topic3", T4: "topic4"}


def topics_of(**counts: int) -> dict[uuid.UUID, TopicSpec]:
    ids = {"t1": T1, "t2": T2, "t3": T3, "t4": T4}
    return {ids[k]: TopicSpec(NAMES[ids[k]], n) for k, n in counts.items()}


def member(subscribed, assigned=None, instance_id=None) -> MemberSpec:
    return MemberSpec(
        frozenset(subscribed),
        {t: frozenset(ps) for t, ps in (assigned or {}).items()},
        instance_id=instance_id,
    )


def assignment(**per_topic) -> dict[uuid.UUID, frozenset[int]]:
    ids = {"t1": T1, "t2": T2, "t3": T3, "t4": T4}
    return {ids[k]: frozenset(v) for k, v in per_topic.items()}


# ---- Kafka's tables ----------------------------------------------------------------------------

# UniformHomogeneousAssignmentBuilderTest: (test name, topics, members, expected).
UNIFORM_HOMOGENEOUS = [
    (
        "testOneMemberNoTopicSubscription",  # Kafka returns no entry at all; we return {} for A
        topics_of(t1=3),
        {"A": member([])},
        {"A": {}},
    ),
    (
        "testFirstAssignmentTwoMembersTwoTopicsNoMemberRacks",
        topics_of(t1=3, t3=2),
        {"A": member([T1, T3]), "B": member([T1, T3])},
        {"A": assignment(t3=[0, 1]), "B": assignment(t1=[0, 1, 2])},
    ),
    (
        "testFirstAssignmentNumMembersGreaterThanTotalNumPartitions",
        topics_of(t3=2),
        {"A": member([T3]), "B": member([T3]), "C": member([T3])},
        {"A": {}, "B": assignment(t3=[0]), "C": assignment(t3=[1])},
    ),
    (
        "testReassignmentForTwoMembersTwoTopicsGivenUnbalancedPrevAssignment",
        topics_of(t1=3, t2=3),
        {
            "A": member([T1, T2], {T1: [0, 1], T2: [0, 1]}),
            "B": member([T1, T2], {T1: [2], T2: [2]}),
        },
        {"A": assignment(t1=[0, 1], t2=[0]), "B": assignment(t1=[2], t2=[1, 2])},
    ),
    (
        "testReassignmentWhenPartitionsAreAddedForTwoMembersTwoTopics",
        topics_of(t1=6, t2=5),
        {
            "A": member([T1, T2], {T1: [0, 2], T2: [0]}),
            "B": member([T1, T2], {T1: [1], T2: [1, 2]}),
        },
        {"A": assignment(t1=[0, 2], t2=[0, 3, 4]), "B": assignment(t1=[1, 3, 4, 5], t2=[1, 2])},
    ),
    (
        "testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics",
        topics_of(t1=3, t2=3),
        {
            "A": member([T1, T2], {T1: [0, 2], T2: [0]}),
            "B": member([T1, T2], {T1: [1], T2: [1, 2]}),
            "C": member([T1, T2]),
        },
        {"A": assignment(t1=[0, 2]), "B": assignment(t1=[1], t2=[1]), "C": assignment(t2=[0, 2])},
    ),
    (
        "testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics",
        topics_of(t1=3, t2=3),
        {
            "A": member([T1, T2], {T1: [0], T2: [0]}),
            "B": member([T1, T2], {T1: [1], T2: [1]}),
        },
        {"A": assignment(t1=[0], t2=[0, 2]), "B": assignment(t1=[1, 2], t2=[1])},
    ),
    (
        "testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics",
        topics_of(t1=2, t2=2),
        {
            "A": member([T2], {T1: [0], T2: [0]}),
            "B": member([T2], {T1: [1], T2: [1]}),
        },
        {"A": assignment(t2=[0]), "B": assignment(t2=[1])},
    ),
]

# UniformHeterogeneousAssignmentBuilderTest.
UNIFORM_HETEROGENEOUS = [
    (
        "testFirstAssignmentTwoMembersTwoTopics",
        topics_of(t1=3, t3=6),
        {"A": member([T1, T3]), "B": member([T3])},
        {"A": assignment(t1=[0, 1, 2], t3=[4]), "B": assignment(t3=[0, 1, 2, 3, 5])},
    ),
    (
        "testFirstAssignmentNumMembersGreaterThanTotalNumPartitions",
        topics_of(t3=1, t1=2),
        {"A": member([T3]), "B": member([T3]), "C": member([T1])},
        {"A": assignment(t3=[0]), "B": {}, "C": assignment(t1=[0, 1])},
    ),
    (
        "testReassignmentForTwoMembersThreeTopicsGivenUnbalancedPrevAssignment",
        topics_of(t1=6, t2=4, t3=4),
        {
            "A": member([T1], {T1: [0, 1, 2]}),
            "B": member([T1, T2], {T1: [3], T2: [0]}),
            "C": member([T1, T2, T3], {T1: [4, 5], T2: [1, 2, 3], T3: [0, 1, 2, 3]}),
        },
        {
            "A": assignment(t1=[0, 1, 2, 5]),
            "B": assignment(t1=[3], t2=[0, 1, 2, 3]),
            "C": assignment(t1=[4], t3=[0, 1, 2, 3]),
        },
    ),
    (
        "testReassignmentWhenPartitionsAreAddedForTwoMembers",
        topics_of(t1=6, t2=5, t3=3, t4=3),
        {
            "A": member([T1, T3], {T1: [0, 1, 2, 3], T3: [0, 1]}),
            "B": member([T1, T2, T3, T4], {T2: [0, 1, 2], T4: [0, 1, 2]}),
        },
        {
            "A": assignment(t1=[0, 1, 2, 3, 4, 5], t3=[0, 1, 2]),
            "B": assignment(t2=[0, 1, 2, 3, 4], t4=[0, 1, 2]),
        },
    ),
    (
        "testReassignmentWhenOneMemberAddedAndPartitionsAddedTwoMembersTwoTopics",
        topics_of(t1=6, t2=7),
        {
            "A": member([T1], {T1: [0, 2], T2: [0]}),
            "B": member([T1, T2], {T1: [1], T2: [1, 2]}),
            "C": member([T1, T2]),
        },
        {
            "A": assignment(t1=[0, 2, 3, 4, 5]),
            "B": assignment(t1=[1], t2=[1, 2, 6]),
            "C": assignment(t2=[0, 3, 4, 5]),
        },
    ),
    (
        "testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersThreeTopics",
        topics_of(t1=3, t2=8, t3=3),
        {
            "A": member([T1, T3], {T1: [0, 1, 2], T3: [0, 1]}),
            "B": member([T2], {T2: [3, 4, 5, 6]}),
        },
        {"A": assignment(t1=[0, 1, 2], t3=[0, 1, 2]), "B": assignment(t2=range(8))},
    ),
    (
        "testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics",
        topics_of(t1=3, t2=5),
        {
            "A": member([T1], {T1: [0, 2], T2: [1, 3]}),
            "B": member([T1, T2], {T1: [1], T2: [0, 2, 4]}),
        },
        {"A": assignment(t1=[0, 1, 2]), "B": assignment(t2=[0, 1, 2, 3, 4])},
    ),
    (
        "testFirstAssignmentWithTwoMembersIncludingOneWithoutSubscriptions",
        topics_of(t1=3),
        {"A": member([T1]), "B": member([])},
        {"A": assignment(t1=[0, 1, 2]), "B": {}},
    ),
    (
        "testTwoMembersNoTopicSubscription",  # Kafka: no entries; we: {} for each member
        topics_of(t1=3),
        {"A": member([]), "B": member([])},
        {"A": {}, "B": {}},
    ),
]

# RangeAssignorTest.
RANGE = [
    (
        "testOneMemberNoTopic",
        topics_of(t1=3),
        {"A": member([])},
        {"A": {}},
    ),
    (
        "testFirstAssignmentTwoMembersTwoTopicsSameSubscriptions",
        topics_of(t1=3, t3=2),
        {"A": member([T1, T3]), "B": member([T1, T3])},
        {"A": assignment(t1=[0, 1], t3=[0]), "B": assignment(t1=[2], t3=[1])},
    ),
    (
        "testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions",
        topics_of(t1=3, t2=3, t3=2),
        {"A": member([T1, T2]), "B": member([T3]), "C": member([T2, T3])},
        {
            "A": assignment(t1=[0, 1, 2], t2=[0, 1]),
            "B": assignment(t3=[0]),
            "C": assignment(t2=[2], t3=[1]),
        },
    ),
    (
        "testFirstAssignmentNumMembersGreaterThanNumPartitions",
        topics_of(t1=3, t3=2),
        {"A": member([T1, T3]), "B": member([T1, T3]), "C": member([T1, T3])},
        {
            "A": assignment(t1=[0], t3=[0]),
            "B": assignment(t1=[1], t3=[1]),
            "C": assignment(t1=[2]),
        },
    ),
    (
        "testReassignmentNumMembersGreaterThanNumPartitionsWhenOneMemberAdded",
        topics_of(t1=2, t2=2),
        {
            "A": member([T1, T2], {T1: [0], T2: [0]}),
            "B": member([T1, T2], {T1: [1], T2: [1]}),
            "C": member([T1, T2]),
        },
        {"A": assignment(t1=[0], t2=[0]), "B": assignment(t1=[1], t2=[1]), "C": {}},
    ),
    (
        "testReassignmentWhenOnePartitionAddedForTwoMembersTwoTopics",
        topics_of(t1=4, t2=4),
        {
            "A": member([T1, T2], {T1: [0, 1], T2: [0, 1]}),
            "B": member([T1, T2], {T1: [2], T2: [2]}),
        },
        {"A": assignment(t1=[0, 1], t2=[0, 1]), "B": assignment(t1=[2, 3], t2=[2, 3])},
    ),
    (
        "testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics",
        topics_of(t1=3, t2=3),
        {
            "A": member([T1, T2], {T1: [0, 1], T2: [0, 1]}),
            "B": member([T1, T2], {T1: [2], T2: [2]}),
            "C": member([T1, T2]),
        },
        {
            "A": assignment(t1=[0], t2=[0]),
            "B": assignment(t1=[1], t2=[1]),
            "C": assignment(t1=[2], t2=[2]),
        },
    ),
    (
        "testReassignmentWhenOneMemberAddedAndOnePartitionAfterInitialAssignmentWithTwoMembersTwoTopics",
        topics_of(t1=4, t2=3),
        {
            "A": member([T1, T2], {T1: [0, 1], T2: [0, 1]}),
            "B": member([T1, T2], {T1: [2], T2: [2]}),
            "C": member([T1]),
        },
        {
            "A": assignment(t1=[0, 1], t2=[0, 1]),
            "B": assignment(t1=[2], t2=[2]),
            "C": assignment(t1=[3]),
        },
    ),
    (
        "testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithTwoMembersTwoTopics",
        topics_of(t1=3, t2=3),
        {"B": member([T1, T2], {T1: [2], T2: [2]})},
        {"B": assignment(t1=[0, 1, 2], t2=[0, 1, 2])},
    ),
    (
        "testReassignmentWhenMultipleSubscriptionsRemovedAfterInitialAssignmentWithThreeMembersTwoTopics",
        topics_of(t1=3, t2=3, t3=2),
        {
            "A": member([T1], {T1: [0, 1, 2], T2: [0]}),
            "B": member([T1, T2, T3], {T2: [1]}),
            "C": member([T2], {T2: [2], T3: [0, 1]}),
        },
        {
            "A": assignment(t1=[0, 1]),
            "B": assignment(t1=[2], t2=[0, 1], t3=[0, 1]),
            "C": assignment(t2=[2]),
        },
    ),
]


@pytest.mark.parametrize("case", UNIFORM_HOMOGENEOUS, ids=[c[0] for c in UNIFORM_HOMOGENEOUS])
def test_uniform_homogeneous_matches_kafka(case):
    _, topics, members, expected = case
    assert len({m.subscribed for m in members.values()}) == 1  # the homogeneous builder
    result = UniformAssignor().assign(members, topics)
    assert result == expected
    check_valid(members, topics, result)
    check_balanced(result)


@pytest.mark.parametrize("case", UNIFORM_HETEROGENEOUS, ids=[c[0] for c in UNIFORM_HETEROGENEOUS])
def test_uniform_heterogeneous_matches_kafka(case):
    _, topics, members, expected = case
    result = UniformAssignor().assign(members, topics)
    assert result == expected
    check_valid(members, topics, result)


def test_uniform_heterogeneous_builder_when_a_topic_runs_out_before_balance():
    """Kafka's testReassignmentWhenTopicPartitionsRunOutAndMembersHaveNoPartitions forces the
    heterogeneous builder on identical subscriptions (UniformAssignor would pick the homogeneous
    one, as ours does): the per-topic loop must stop when the givers have nothing of the topic."""
    topics = topics_of(t1=2, t2=2, t3=2)
    members = {
        "A": member([T1, T2, T3], {T1: [0, 1], T2: [0, 1], T3: [0, 1]}),
        "B": member([T1, T2, T3]),
    }
    ids = sorted(members)
    builder = _UniformHeterogeneous(ids, members, topics, {m: members[m].subscribed for m in ids})
    assert builder.build() == {
        "A": assignment(t2=[0], t3=[0, 1]),
        "B": assignment(t1=[0, 1], t2=[1]),
    }
    # The assignor itself takes the homogeneous path: as balanced, as few moves (3).
    result = UniformAssignor().assign(members, topics)
    check_valid(members, topics, result)
    check_balanced(result)
    assert moved(members, result) == 3


@pytest.mark.parametrize("case", RANGE, ids=[c[0] for c in RANGE])
def test_range_matches_kafka(case):
    _, topics, members, expected = case
    result = RangeAssignor().assign(members, topics)
    assert result == expected
    check_valid(members, topics, result)
    check_ranges(members, topics, result)


def test_range_static_membership():
    """RangeAssignorTest.testStaticMembership: a static member that comes back with a new member
    id (same instance id) gets the same partitions."""
    topics = topics_of(t1=3)
    members = {"A": member([T1], instance_id="instanceA"), "B": member([T1], instance_id="instanceB")}
    first = RangeAssignor().assign(members, topics)
    assert first == {"A": assignment(t1=[0, 1]), "B": assignment(t1=[2])}
    members = {"memberA1": member([T1], instance_id="instanceA"), "B": member([T1], instance_id="instanceB")}
    again = RangeAssignor().assign(members, topics)
    assert again == {"memberA1": first["A"], "B": first["B"]}


def test_range_mixed_static_membership():
    """RangeAssignorTest.testMixedStaticMembership: static members come first (by instance id),
    then dynamic ones (by member id) — so replacing a static member's id changes nothing."""
    topics = topics_of(t1=5)
    members = {
        "A": member([T1], instance_id="instanceA"),
        "C": member([T1], instance_id="instanceC"),
        "B": member([T1]),
    }
    first = RangeAssignor().assign(members, topics)
    assert first == {"A": assignment(t1=[0, 1]), "C": assignment(t1=[2, 3]), "B": assignment(t1=[4])}
    del members["A"]
    members["memberA1"] = member([T1], instance_id="instanceA")
    again = RangeAssignor().assign(members, topics)
    assert again == {"memberA1": first["A"], "B": first["B"], "C": first["C"]}


def test_orders_are_javas():
    # Kafka's Uuid.compareTo is signed: an id with the top bit set sorts first.
    high, low = uuid.UUID(int=1 << 127), uuid.UUID(int=1)
    assert sorted([low, high], key=topic_id_order) == [high, low]
    # String.compareTo compares UTF-16 code units: U+10000 (a surrogate pair, D800 DC00) sorts
    # before U+FFFD, unlike Python's code-point order.
    assert sorted(["\ufffd", "\U00010000"], key=member_id_order) == ["\U00010000", "\ufffd"]
    # Range: static members first, by instance id, whatever their member ids.
    specs = {"a": member([]), "z": member([], instance_id="i2"), "y": member([], instance_id="i1")}
    assert sorted(specs, key=lambda m: range_member_order(m, specs[m])) == ["y", "z", "a"]


def test_registry():
    assert list(ASSIGNORS) == ["uniform", "range"]
    assert DEFAULT_ASSIGNOR == "uniform" == next(iter(ASSIGNORS))
    assert all(a.name == key for key, a in ASSIGNORS.items())
    for assignor in ASSIGNORS.values():
        assert assignor.assign({}, topics_of(t1=3)) == {}


def test_uniform_member_replacement_moves_only_the_departed_members_partitions():
    """A member leaves and another joins: the newcomer gets exactly what the leaver had."""
    topics = topics_of(t1=7, t2=5)
    members = {m: member([T1, T2]) for m in "ABC"}
    first = UniformAssignor().assign(members, topics)
    members = {m: member([T1, T2], first[m]) for m in "AB"} | {"D": member([T1, T2])}
    second = UniformAssignor().assign(members, topics)
    assert second["A"] == first["A"] and second["B"] == first["B"]
    assert second["D"] == first["C"]


def test_stale_claims_are_dropped():
    """Claims on deleted topics, unsubscribed topics, partitions past the count, and one
    partition claimed by two members never produce an invalid assignment."""
    gone = uuid.UUID(int=99)
    topics = topics_of(t1=4, t2=2)
    for subscribed in ([T1, T2], [T1]):
        members = {
            "A": member(subscribed, {T1: [0, 1, 9], gone: [0]}),
            "B": member([T1, T2], {T1: [1, 2], T2: [0, 1, 5]}),
        }
        for assignor in ASSIGNORS.values():
            result = assignor.assign(members, topics)
            check_valid(members, topics, result)


# ---- invariants --------------------------------------------------------------------------------


def check_valid(members, topics, result) -> None:
    assert set(result) == set(members)
    owners: Counter = Counter()
    for member_id, assigned in result.items():
        for topic_id, partitions in assigned.items():
            assert partitions, "no empty partition sets"
            assert isinstance(partitions, frozenset)
            assert topic_id in topics and topic_id in members[member_id].subscribed
            assert all(0 <= p < topics[topic_id].partitions for p in partitions)
            owners.update((topic_id, p) for p in partitions)
    subscribed = {t for m in members.values() for t in m.subscribed if t in topics}
    expected = {(t, p) for t in subscribed for p in range(topics[t].partitions)}
    assert set(owners) == expected
    assert all(count == 1 for count in owners.values())


def sizes(result) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def check_balanced(result) -> None:
    counts = sizes(result).values()
    assert max(counts) - min(counts) <= 1


def valid_claims(members, topics) -> dict[str, set[tuple[uuid.UUID, int]]]:
    return {
        m: {
            (t, p)
            for t, ps in spec.assigned.items()
            if t in topics and t in spec.subscribed
            for p in ps
            if 0 <= p < topics[t].partitions
        }
        for m, spec in members.items()
    }


def moved(members, result) -> int:
    """Partitions that changed owner (or were newly handed out)."""
    return sum(
        1
        for m, assigned in result.items()
        for t, ps in assigned.items()
        for p in ps
        if p not in members[m].assigned.get(t, ())
    )


def kept(members, topics, result) -> int:
    claims = valid_claims(members, topics)
    return sum(1 for m, a in result.items() for t, ps in a.items() for p in ps if (t, p) in claims[m])


def check_ranges(members, topics, result) -> None:
    """Per topic, the subscribers in Kafka's range order hold consecutive ranges from 0, the
    first ``partitions % subscribers`` of them one partition more."""
    order = sorted(members, key=lambda m: range_member_order(m, members[m]))
    for topic_id, spec in topics.items():
        subscribers = [m for m in order if topic_id in members[m].subscribed]
        start = 0
        for position, m in enumerate(subscribers):
            size = spec.partitions // len(subscribers) + (position < spec.partitions % len(subscribers))
            assert result[m].get(topic_id, frozenset()) == frozenset(range(start, start + size))
            start += size


# ---- properties --------------------------------------------------------------------------------

MEMBER_IDS = st.text(alphabet="ABCab\u00e9\U00010000", min_size=1, max_size=3)


@st.composite
def groups(draw, homogeneous: bool | None = None, duplicates: bool = False):
    """A group: topics, members with subscriptions, and current assignments — from one owner
    per partition (as a real group's targets), plus stale claims; with ``duplicates``, claims
    drawn independently per member (two members may claim one partition)."""
    topic_ids = draw(st.lists(st.uuids(), min_size=1, max_size=4, unique=True))
    topics = {t: TopicSpec(f"topic-{i}", draw(st.integers(1, 12))) for i, t in enumerate(topic_ids)}
    member_ids = draw(st.lists(MEMBER_IDS, min_size=1, max_size=8, unique=True))
    if homogeneous:
        common = frozenset(draw(st.lists(st.sampled_from(topic_ids), unique=True)))
        subscriptions = {m: common for m in member_ids}
    else:
        subscriptions = {
            m: frozenset(draw(st.lists(st.sampled_from(topic_ids), unique=True))) for m in member_ids
        }
    claims: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in member_ids}
    for t, spec in topics.items():
        for p in range(spec.partitions + 1):  # + 1: a partition past the count (a stale claim)
            if duplicates:
                for m in member_ids:
                    if draw(st.booleans()):
                        claims[m].setdefault(t, set()).add(p)
            else:
                owner = draw(st.none() | st.sampled_from(member_ids))
                if owner is not None:
                    claims[owner].setdefault(t, set()).add(p)
    if draw(st.booleans()):  # a deleted topic in someone's old assignment
        claims[member_ids[0]][uuid.UUID(int=0)] = {0, 1}
    instance_ids = {m: draw(st.none() | st.just(f"instance-{i}")) for i, m in enumerate(member_ids)}
    members = {
        m: MemberSpec(
            subscriptions[m],
            {t: frozenset(ps) for t, ps in claims[m].items()},
            instance_id=instance_ids[m],
        )
        for m in member_ids
    }
    return topics, members


def shuffled(topics, members, seed: int):
    rng = random.Random(seed)
    topic_items = list(topics.items())
    rng.shuffle(topic_items)
    member_items = []
    for m, spec in members.items():
        assigned = list(spec.assigned.items())
        rng.shuffle(assigned)
        member_items.append((m, MemberSpec(spec.subscribed, dict(assigned), spec.rack, spec.instance_id)))
    rng.shuffle(member_items)
    return dict(topic_items), dict(member_items)


@pytest.mark.parametrize("name", list(ASSIGNORS))
@settings(max_examples=300, deadline=None)
@given(group=groups(), seed=st.integers(0, 2**32))
def test_valid_deterministic_idempotent(name, group, seed):
    topics, members = group
    assignor = ASSIGNORS[name]
    result = assignor.assign(members, topics)
    check_valid(members, topics, result)
    assert assignor.assign(*reversed(shuffled(topics, members, seed))) == result
    # Kafka's testAssignmentReuse: the result fed back as the current assignment is kept.
    again = {m: MemberSpec(s.subscribed, result[m], s.rack, s.instance_id) for m, s in members.items()}
    assert assignor.assign(again, topics) == result


@pytest.mark.parametrize("name", list(ASSIGNORS))
@settings(max_examples=150, deadline=None)
@given(group=groups(duplicates=True))
def test_valid_with_a_partition_claimed_twice(name, group):
    topics, members = group
    check_valid(members, topics, ASSIGNORS[name].assign(members, topics))


@settings(max_examples=300, deadline=None)
@given(group=groups(homogeneous=True))
def test_uniform_homogeneous_balanced_and_moves_the_fewest(group):
    """Balanced (sizes differ by at most one), and keeps as many current partitions as any
    balanced assignment can: everyone keeps up to the minimum quota, and the members that had
    more keep one more while the extra slots last."""
    topics, members = group
    result = UniformAssignor().assign(members, topics)
    check_balanced(result)
    (subscribed,) = {m.subscribed for m in members.values()}
    total = sum(topics[t].partitions for t in subscribed)
    minimum, extra = divmod(total, len(members))
    had = [len(c) for c in valid_claims(members, topics).values()]
    best = sum(min(n, minimum) for n in had) + min(extra, sum(n > minimum for n in had))
    assert kept(members, topics, result) == best


@settings(max_examples=300, deadline=None)
@given(group=groups(homogeneous=False))
def test_uniform_heterogeneous_balanced_per_topic(group):
    """No single move of a topic's partition between two of its subscribers would improve
    balance: a subscriber holding some of the topic has at most one more partition in total
    than any other subscriber."""
    topics, members = group
    result = UniformAssignor().assign(members, topics)
    total = sizes(result)
    for topic_id in topics:
        subscribers = [m for m in members if topic_id in members[m].subscribed]
        for giver in subscribers:
            if result[giver].get(topic_id):
                assert all(total[giver] - total[m] <= 1 for m in subscribers)


@settings(max_examples=300, deadline=None)
@given(group=groups())
def test_range_ranges_and_co_partitioning(group):
    topics, members = group
    result = RangeAssignor().assign(members, topics)
    check_ranges(members, topics, result)
    # Co-partitioning: two topics with the same subscribers and partition count are split alike.
    for a in topics:
        for b in topics:
            same_members = {m for m in members if a in members[m].subscribed} == {
                m for m in members if b in members[m].subscribed
            }
            if a != b and same_members and topics[a].partitions == topics[b].partitions:
                for m in members:
                    assert result[m].get(a, frozenset()) == result[m].get(b, frozenset())


# ---- scale -------------------------------------------------------------------------------------


def test_thousand_members_thousand_partitions():
    """1000 members over 10 topics of 100 partitions: homogeneous from scratch, then one member
    replaced; heterogeneous (members on overlapping halves of the topics); range."""
    topic_ids = [uuid.UUID(int=i + 1) for i in range(10)]
    topics = {t: TopicSpec(f"topic-{i}", 100) for i, t in enumerate(topic_ids)}
    everything = frozenset(topic_ids)
    members = {f"member-{i:04d}": MemberSpec(everything, {}) for i in range(1000)}

    uniform = UniformAssignor()
    first = uniform.assign(members, topics)
    check_valid(members, topics, first)
    assert set(sizes(first).values()) == {1}

    members = {m: MemberSpec(everything, first[m]) for m in members if m != "member-0000"}
    members["member-1000"] = MemberSpec(everything, {})
    second = uniform.assign(members, topics)
    check_valid(members, topics, second)
    assert second["member-1000"] == first["member-0000"]
    assert moved(members, second) == 1

    halves = [frozenset(topic_ids[:6]), frozenset(topic_ids[4:])]
    members = {f"member-{i:04d}": MemberSpec(halves[i % 2], {}) for i in range(1000)}
    heterogeneous = uniform.assign(members, topics)
    check_valid(members, topics, heterogeneous)
    assert max(sizes(heterogeneous).values()) - min(sizes(heterogeneous).values()) <= 1

    ranged = RangeAssignor().assign(members, topics)
    check_valid(members, topics, ranged)
    check_ranges(members, topics, ranged)
