"""The classic group APIs around membership: DescribeGroups, ListGroups filters, DeleteGroups,
FindCoordinator. :mod:`.scenarios_groups`' invariants hold here, and its helpers serve.
"""

from __future__ import annotations

import dataclasses

from .framework import DESCRIBE_GROUPS, FIND_COORDINATOR, LIST_GROUPS
from .scenarios_groups import (build, delete_groups, describe, join, join_member, joined, leave, scenario,
                               second_member_joining, simple_commit, stable_member)


# ---------------------------------------------------------------------- DescribeGroups, ListGroups, DeleteGroups


@scenario("groups")
def describe_unknown_group(k):
    """DescribeGroups v5 of a group that does not exist: NONE, state Dead."""
    return describe(k, k.name("g"))


@scenario("groups")
def describe_unknown_group_v6(k):
    """DescribeGroups v6 of a group that does not exist: GROUP_ID_NOT_FOUND with a message."""
    return describe(k, k.name("g"), version=6)


@scenario("groups")
def describe_empty_group(k):
    """DescribeGroups of a group with committed offsets and no members: Empty."""
    g = k.name("g")
    t = k.create_topic("t")
    simple_commit(k, g, t, 1)
    return describe(k, g)


@scenario("groups")
def describe_completing_rebalance(k):
    """DescribeGroups after the join, before SyncGroup: CompletingRebalance, members without assignments."""
    g = k.name("g")
    j = join_member(k, g)
    return describe(k, g, order=[j.member_id])


@scenario("groups")
def describe_preparing_rebalance(k):
    """DescribeGroups while a second member's join waits: PreparingRebalance."""
    g = k.name("g")
    j1, _ = stable_member(k, g)
    first, t, result = second_member_joining(k, g)
    d = describe(k, g, order=[j1.member_id, first.member_id])
    join(k, g, j1.member_id)
    joined(t, result, "second join")
    return d


@scenario("groups")
def describe_several_groups(k):
    """DescribeGroups v5 of a Stable group, an Empty one and an unknown one in one request (by group id)."""
    j, _ = stable_member(k, k.name("stable"))
    t = k.create_topic("t")
    simple_commit(k, k.name("empty"), t, 1)
    resp = describe(k, k.name("unknown"), k.name("stable"), k.name("empty"), order=[j.member_id])
    # Kafka answers in the order of its coordinator shards (a HashMap of __consumer_offsets
    # partitions), not the request's; clients match groups by id, so the groups are compared by id.
    return dataclasses.replace(resp, groups=tuple(sorted(resp.groups, key=lambda g: g.group_id)))


@scenario("groups")
def leave_dead_group(k):
    """LeaveGroup v5 to a group DeleteGroups removed."""
    g = k.name("g")
    j, _ = stable_member(k, g)
    leave(k, g, j.member_id)
    delete_groups(k, g)
    return leave(k, g, j.member_id)


@scenario("groups")
def describe_dead_after_delete(k):
    """DescribeGroups of a group DeleteGroups removed: Dead."""
    g = k.name("g")
    j, _ = stable_member(k, g)
    leave(k, g, j.member_id)
    delete_groups(k, g)
    return describe(k, g)


@scenario("groups")
def describe_with_authorized_operations(k):
    """DescribeGroups v5 with include_authorized_operations, no authorizer configured."""
    g = k.name("g")
    j, _ = stable_member(k, g)
    resp = k.send(build(DESCRIBE_GROUPS, 5, groups=(g,), include_authorized_operations=True))
    return [(x.group_state, x.authorized_operations) for x in resp.groups]


@scenario("groups")
def delete_groups_empty_group_id(k):
    """DeleteGroups of group id "" (a group offsets were committed to): deleted, then GROUP_ID_NOT_FOUND."""
    t = k.create_topic("t")
    simple_commit(k, "", t, 1)  # "" is shared by every run: make it exist whatever ran before
    return [delete_groups(k, ""), delete_groups(k, "")]


@scenario("groups")
def list_groups_unknown_state_filter(k):
    """ListGroups v4 with a state that does not exist ("Bogus"): no groups, or an error."""
    stable_member(k, k.name("g"))
    return _listed(k, k.send(build(LIST_GROUPS, 4, states_filter=("Bogus",))))


def _listed(k, resp):
    """ListGroups' groups of this run, sorted by name."""
    mine = [g for g in resp.groups if g.group_id.startswith(k.prefix)]
    return dataclasses.replace(resp, groups=tuple(sorted(mine, key=lambda g: g.group_id)))


@scenario("groups")
def list_groups_states_filter(k):
    """ListGroups v4 with states_filter: all, Stable, Empty, CompletingRebalance (this run's groups)."""
    stable_member(k, k.name("stable"))
    join_member(k, k.name("completing"))
    j, _ = stable_member(k, k.name("empty"))
    leave(k, k.name("empty"), j.member_id)
    out = []
    for states in ((), ("Stable",), ("Empty",), ("CompletingRebalance",), ("stable",)):
        out.append(_listed(k, k.send(build(LIST_GROUPS, 4, states_filter=states))))
    return out


@scenario("groups")
def list_groups_types_filter(k):
    """ListGroups v5 with types_filter: classic, consumer, none (this run's groups)."""
    stable_member(k, k.name("classic"))
    out = []
    for types in ((), ("classic",), ("consumer",), ("Classic",)):
        out.append(_listed(k, k.send(build(LIST_GROUPS, 5, states_filter=(), types_filter=types))))
    return out


@scenario("groups")
def delete_groups_mixed(k):
    """DeleteGroups of an Empty group, a group with a member and an unknown group: NONE, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND."""
    t = k.create_topic("t")
    simple_commit(k, k.name("empty"), t, 1)
    stable_member(k, k.name("busy"))
    resp = delete_groups(k, k.name("empty"), k.name("busy"), k.name("unknown"))
    return dataclasses.replace(resp, results=tuple(sorted(resp.results, key=lambda r: r.group_id)))


@scenario("groups")
def delete_groups_twice(k):
    """DeleteGroups of a group just deleted: GROUP_ID_NOT_FOUND."""
    t = k.create_topic("t")
    simple_commit(k, k.name("g"), t, 1)
    return [delete_groups(k, k.name("g")), delete_groups(k, k.name("g"))]


@scenario("groups")
def join_after_delete(k):
    """A group deleted by DeleteGroups forms again on the next JoinGroup: generation 1."""
    g = k.name("g")
    j, _ = stable_member(k, g)
    leave(k, g, j.member_id)
    delete_groups(k, g)
    return join_member(k, g)


# ---------------------------------------------------------------------- FindCoordinator


@scenario("groups")
def find_coordinator_v3(k):
    """FindCoordinator v3 for a group (one key)."""
    return k.find_coordinator(k.name("g"), version=3)


@scenario("groups")
def find_coordinator_v4_batched(k):
    """FindCoordinator v4 with three group keys in one request."""
    resp = k.send(build(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=(k.name("a"), k.name("b"), k.name("c"))))
    return dataclasses.replace(resp, coordinators=tuple(sorted(resp.coordinators, key=lambda c: c.key)))


@scenario("groups")
def find_coordinator_empty_group_id(k):
    """FindCoordinator for group id "" (v3 and v4): INVALID_REQUEST / INVALID_GROUP_ID."""
    return [k.find_coordinator("", version=3), k.find_coordinator("", version=4)]


@scenario("groups")
def find_coordinator_unknown_key_type(k):
    """FindCoordinator v4 with key type 5 (not a coordinator type): INVALID_REQUEST."""
    return k.find_coordinator(k.name("g"), key_type=5, version=4)
