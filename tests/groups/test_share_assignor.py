"""The share-group assignor (:mod:`oncelog.groups.share_assignor`, Kafka's ``SimpleAssignor``).

Cases worked by hand from Kafka's algorithm (quotas, sharing, stickiness on join and leave,
unsubscribed and stale claims, the heterogeneous hash / round robin / merge), then hypothesis
properties: validity for any input, and for homogeneous groups each partition held by at most
``ceil(M/P)`` members and each member by at most its quota — from scratch (and along a chain of
joins and leaves fed its own output) exactly ``ceil(M/P)`` members per partition and sizes within
one partition.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oncelog.groups.share_assignor import java_string_hash, simple_assign


def sizes(result) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def holders(result) -> dict[tuple[str, int], int]:
    count: dict[tuple[str, int], int] = {}
    for a in result.values():
        for t, ps in a.items():
            for p in ps:
                count[(t, p)] = count.get((t, p), 0) + 1
    return count


def flat(assignment) -> set[tuple[str, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def check_valid(result, members, partitions):
    assert set(result) == set(members)
    for m, a in result.items():
        for t, ps in a.items():
            assert ps, "never an empty partition set"
            assert t in members[m] and t in partitions
            assert all(0 <= p < partitions[t] for p in ps)


# ---- Java's String.hashCode ---------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("", 0), ("a", 97), ("hello", 99162322), ("Aa", 2112), ("BB", 2112),
    ("polygenelubricants", -2**31),  # Integer.MIN_VALUE: abs(h % n) is still in range
    ("\U0001F600", 1772899),  # one code point, two UTF-16 code units: 0xD83D * 31 + 0xDE00
    ("Hello World", -862545276),  # wraps past 2**31
])
def test_java_string_hash(text, expected):
    assert java_string_hash(text) == expected
    assert -2**31 <= java_string_hash(text) < 2**31


# ---- homogeneous --------------------------------------------------------------------------------


def test_fewer_members_than_partitions_balanced_by_member_order():
    result = simple_assign({"b": {"t"}, "a": {"t"}}, {"t": 5})
    # quotas: precise 2.5 -> a (first) ceil(2.5) = 3, b 5 - 3 = 2
    assert result == {"a": {"t": {0, 2, 4}}, "b": {"t": {1, 3}}}


def test_more_members_than_partitions_share_each_partition():
    members = {m: {"t"} for m in "abc"}
    result = simple_assign(members, {"t": 2})
    # desiredSharing ceil(3/2) = 2; precise 4/3: quotas 2, 1, 1
    assert result == {"a": {"t": {0, 1}}, "b": {"t": {0}}, "c": {"t": {1}}}
    assert holders(result) == {("t", 0): 2, ("t", 1): 2}


def test_many_members_one_partition_all_share_it():
    members = {f"m{i}": {"t"} for i in range(7)}
    result = simple_assign(members, {"t": 1})
    assert all(a == {"t": {0}} for a in result.values())


def test_quotas_follow_kafkas_float_formula():
    members = {f"m{i:02}": {"t", "u"} for i in range(7)}
    result = simple_assign(members, {"t": 3, "u": 2})  # M 7, P 5: sharing 2, precise 10/7
    precise = 2 * 5 / 7
    quotas = [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(7)]
    assert [sizes(result)[f"m{i:02}"] for i in range(7)] == quotas == [2, 1, 2, 1, 2, 1, 1]
    assert set(holders(result).values()) == {2}


def test_stickiness_when_a_member_joins():
    members = {m: {"t"} for m in ("a", "c", "e")}
    before = simple_assign(members, {"t": 6})
    assert sizes(before) == {"a": 2, "c": 2, "e": 2}
    after = simple_assign({**members, "b": {"t"}}, {"t": 6}, before)
    # quotas in member order a, b, c, e: 2, 1, 2, 1 — a and c keep all, e gives up one
    assert sizes(after) == {"a": 2, "b": 1, "c": 2, "e": 1}
    for m in members:
        assert flat(after[m]) <= flat(before[m])
    moved = sum(len(flat(before[m]) - flat(after[m])) for m in members)
    assert moved == 1
    assert holders(after) == {("t", p): 1 for p in range(6)}


def test_stickiness_when_a_member_leaves():
    members = {m: {"t"} for m in "abcd"}
    before = simple_assign(members, {"t": 8})
    del members["b"]
    after = simple_assign(members, {"t": 8}, before)
    for m in members:
        assert flat(before[m]) <= flat(after[m])
    assert sorted(sizes(after).values()) == [2, 3, 3]
    assert holders(after) == {("t", p): 1 for p in range(8)}


def test_stickiness_with_sharing_when_a_member_joins():
    members = {m: {"t"} for m in "abcd"}
    before = simple_assign(members, {"t": 2})  # sharing 2: each member 1
    assert set(sizes(before).values()) == {1}
    after = simple_assign({**members, "e": {"t"}}, {"t": 2}, before)  # sharing 3
    for m in members:
        assert flat(before[m]) <= flat(after[m])
    assert holders(after) == {("t", 0): 3, ("t", 1): 3}
    assert max(sizes(after).values()) - min(sizes(after).values()) <= 1


def test_the_same_assignment_again_is_unchanged():
    members = {f"m{i}": {"t", "u"} for i in range(5)}
    first = simple_assign(members, {"t": 4, "u": 3})
    assert simple_assign(members, {"t": 4, "u": 3}, first) == first


def test_unsubscribed_and_stale_claims_are_dropped():
    members = {"a": {"t"}, "b": {"t"}}
    current = {
        "a": {"t": {0, 1, 9}, "old": {0}},  # 9 is beyond t's count; "old" is not subscribed
        "b": {"gone": {0}, "t": {-1}},
        "left": {"t": {2}},  # a member no longer in the group
    }
    result = simple_assign(members, {"t": 3, "old": 2}, current)
    check_valid(result, members, {"t": 3, "old": 2})
    assert flat(result["a"]) <= {("t", 0), ("t", 1)}
    assert "old" not in result["a"] and "gone" not in result["b"]
    assert holders(result) == {("t", 0): 1, ("t", 1): 1, ("t", 2): 1}


def test_unsubscribed_topics_are_never_assigned():
    members = {m: {"t"} for m in "abc"}
    result = simple_assign(members, {"t": 2, "other": 10})
    assert all(set(a) <= {"t"} for a in result.values())


def test_subscribed_topic_that_is_not_assignable_is_ignored():
    members = {m: {"t", "missing"} for m in "ab"}
    result = simple_assign(members, {"t": 2})
    assert result == {"a": {"t": {0}}, "b": {"t": {1}}}


def test_overfilled_member_gives_up_partitions():
    members = {"a": {"t"}, "b": {"t"}}
    result = simple_assign(members, {"t": 4}, {"a": {"t": {0, 1, 2, 3}}})
    assert sizes(result) == {"a": 2, "b": 2}
    assert holders(result) == {("t", p): 1 for p in range(4)}


def test_overshared_partition_is_revoked():
    members = {m: {"t"} for m in "abcd"}
    # every member holds partition 0; sharing is 2 (4 members, 2 partitions)
    result = simple_assign(members, {"t": 2}, {m: {"t": {0}} for m in members})
    assert holders(result) == {("t", 0): 2, ("t", 1): 2}
    assert set(sizes(result).values()) == {1}


# ---- heterogeneous ------------------------------------------------------------------------------


def test_heterogeneous_hash_then_round_robin():
    # hash("a") = 97 over a's [t0, t1] -> t1; hash("b") = 98 over b's [t0, t1, u0] -> u0;
    # t0 is free: round robin over t's subscribers [a, b] -> a
    result = simple_assign({"a": {"t"}, "b": {"t", "u"}}, {"t": 2, "u": 1})
    assert result == {"a": {"t": {0, 1}}, "b": {"u": {0}}}


def test_heterogeneous_merges_the_current_assignment():
    result = simple_assign({"a": {"t"}, "b": {"t", "u"}}, {"t": 2, "u": 1}, {"b": {"t": {0}}})
    # t0 is held by b (so not round-robined) and b still subscribes to t: b keeps it
    assert result == {"a": {"t": {1}}, "b": {"t": {0}, "u": {0}}}


def test_heterogeneous_hashed_partition_overrides_current_holders():
    # a hashes to t1 (97 % 2), b to u0 (98 % 3), c to u0 (its only one); t0 round-robins to a.
    # b held t1, but step one gave t1 out: current claims merge only for partitions not given out
    result = simple_assign({"a": {"t"}, "c": {"u"}, "b": {"t", "u"}}, {"t": 2, "u": 1},
                           {"b": {"t": {1}}})
    assert result == {"a": {"t": {0, 1}}, "b": {"u": {0}}, "c": {"u": {0}}}


def test_heterogeneous_claim_of_an_unsubscribed_topic_keeps_the_partition_out():
    # Kafka's quirk, kept: c holds t0 but now subscribes to u only. t0 is in the current assignment
    # so not round-robined, and not merged back (c no longer subscribes): nobody gets it
    members = {"a": {"t"}, "c": {"u"}}
    result = simple_assign(members, {"t": 2, "u": 1}, {"c": {"t": {0}}})
    assert result == {"a": {"t": {1}}, "c": {"u": {0}}}


def test_heterogeneous_member_without_subscription_gets_nothing():
    result = simple_assign({"a": {"t"}, "b": set()}, {"t": 3})
    assert result == {"a": {"t": {0, 1, 2}}, "b": {}}


def test_heterogeneous_every_partition_placed_from_scratch():
    members = {f"m{i}": ({"t"} if i % 2 else {"t", "u"}) for i in range(5)}
    result = simple_assign(members, {"t": 4, "u": 6})
    check_valid(result, members, {"t": 4, "u": 6})
    assert set(holders(result)) == {("t", p) for p in range(4)} | {("u", p) for p in range(6)}


# ---- empty inputs and determinism ---------------------------------------------------------------


def test_empty_inputs():
    assert simple_assign({}, {"t": 3}) == {}
    assert simple_assign({"a": {"t"}}, {}) == {"a": {}}
    assert simple_assign({"a": {"t"}, "b": {"t"}}, {"t": 0}) == {"a": {}, "b": {}}
    assert simple_assign({"a": set(), "b": set()}, {"t": 3}) == {"a": {}, "b": {}}
    assert simple_assign({"a": {"t"}}, {"t": 2}, {"a": {}}) == {"a": {"t": {0, 1}}}


def test_independent_of_dict_and_set_order():
    rnd = random.Random(7)
    members = {f"member-{i}": {"t", "u", "v"} if i % 3 else {"t", "u"} for i in range(9)}
    partitions = {"t": 4, "u": 2, "v": 3}
    current = {"member-1": {"t": {0, 1}}, "member-4": {"v": {2}}}
    expected = simple_assign(members, partitions, current)
    for _ in range(5):
        keys = list(members)
        rnd.shuffle(keys)
        shuffled = {k: set(sorted(members[k], reverse=True)) for k in keys}
        parts = dict(sorted(partitions.items(), reverse=True))
        assert simple_assign(shuffled, parts, current) == expected


# ---- properties ---------------------------------------------------------------------------------

TOPICS = ["t", "u", "v"]
member_ids = st.text(alphabet="abcxyz-0123\u00e9\U0001F600", min_size=1, max_size=6)
partition_counts = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 6), max_size=3)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(member_ids, st.sets(st.sampled_from(TOPICS + ["x"])), max_size=12),
       partition_counts,
       st.dictionaries(member_ids, st.dictionaries(st.sampled_from(TOPICS + ["x"]),
                                                   st.sets(st.integers(-1, 7), max_size=4)), max_size=8))
def test_valid_for_any_input(members, partitions, current):
    result = simple_assign(members, partitions, current)
    check_valid(result, members, partitions)
    assert simple_assign(dict(reversed(members.items())), partitions, current) == result


def _homogeneous_bounds(result, n_members, partitions):
    n = sum(partitions.values())
    if n == 0:
        assert all(a == {} for a in result.values())
        return None
    sharing = -(-n_members // n)
    count = holders(result)
    assert set(count) == {(t, p) for t, c in partitions.items() for p in range(c)}
    assert all(1 <= c <= sharing for c in count.values())
    assert max(sizes(result).values()) <= math.ceil(sharing * n / n_members)
    return sharing


@settings(max_examples=150, deadline=None)
@given(st.sets(member_ids, min_size=1, max_size=20), partition_counts,
       st.dictionaries(member_ids, st.dictionaries(st.sampled_from(TOPICS),
                                                   st.sets(st.integers(0, 6), max_size=4)), max_size=10))
def test_homogeneous_bounds_with_any_current(names, partitions, current):
    members = {m: set(partitions) for m in names}
    result = simple_assign(members, partitions, current)
    check_valid(result, members, partitions)
    _homogeneous_bounds(result, len(members), partitions)


@settings(max_examples=150, deadline=None)
@given(st.sets(member_ids, min_size=1, max_size=25), partition_counts)
def test_homogeneous_from_scratch_is_balanced_and_fully_shared(names, partitions):
    members = {m: set(partitions) for m in names}
    result = simple_assign(members, partitions)
    sharing = _homogeneous_bounds(result, len(members), partitions)
    if sharing:
        assert set(holders(result).values()) == {sharing}
        assert max(sizes(result).values()) - min(sizes(result).values()) <= 1


@settings(max_examples=100, deadline=None)
@given(st.sets(member_ids, min_size=1, max_size=12), partition_counts,
       st.lists(st.tuples(st.booleans(), member_ids), max_size=8))
def test_homogeneous_stays_balanced_through_joins_and_leaves(names, partitions, changes):
    topics = set(partitions)
    names = set(names)
    result = simple_assign({m: topics for m in names}, partitions)
    for join, name in changes:
        if join:
            names.add(name)
        elif len(names) > 1:
            names.discard(sorted(names)[hash(name) % len(names)])
        before = result
        result = simple_assign({m: topics for m in names}, partitions, before)
        _homogeneous_bounds(result, len(names), partitions)
        if sum(partitions.values()):
            assert max(sizes(result).values()) - min(sizes(result).values()) <= 1
