"""The partition assignor of KIP-932 share groups: Kafka's ``SimpleAssignor`` (name ``simple``, the
only one ``group.share.assignors`` offers). Sans-IO and pure: :func:`simple_assign` takes each
member's subscribed topic names, the assignable topics' partition counts and the current target
assignment, and returns the new one.

Unlike a consumer group's, a share group's assignment may give one partition to several members:
records are acquired one by one, so members share a partition's records. Kafka's principles,
balance first: the sizes of any two members' assignments should not differ by more than one
partition; then stickiness: keep as much of the current assignment as that allows.

Every member subscribing to the same topics — ``SimpleHomogeneousAssignmentBuilder``: with M
members and P partitions, each partition goes to ``desiredSharing = ceil(M / P)`` members (so
with M > P partitions are shared) and member *i* (in member order) may hold
``ceil(q * (i + 1)) - ceil(q * i)`` partitions, ``q = desiredSharing * P / M`` (a float, as Java's
double). The steps: keep only the current partitions of subscribed topics; revoke from members
above their quota; revoke from partitions held by more than ``desiredSharing`` members; then hand
each partition still short of ``desiredSharing`` to the members still below their quota that do
not hold it, cycling through them. When no such member is left for a partition the builder stops
short (Kafka: "a slight imbalance is tolerated"): from scratch and with M <= P the result is
exactly the quotas; otherwise a partition may have fewer members than ``desiredSharing``.

Different subscriptions — ``SimpleAssignor.assignHeterogeneous``: every member with a non-empty
subscription gets ``partitions[abs(hashCode(memberId) % n)]`` of its own list of ``n`` subscribed
partitions (Java's ``String.hashCode``: :func:`java_string_hash`); every partition that neither
step gave out nor any member holds now goes round robin to its topic's subscribers; then each
member keeps the partitions it holds now of topics it still subscribes to, unless step one or two
gave the partition out. No balance is promised here.

Orders (Kafka iterates hash maps; clients accept any assignment, so bit-exact parity is not
sought): members in Java's ``String.compareTo`` order, topics by name, partitions ascending. The
result is a function of the input's content — dict and set orders do not matter.

Invariants (``tests/groups/test_share_assignor.py``):

* the result has an entry for every member, ``{}`` when it gets nothing, and never an empty
  partition set;
* a member gets partitions only of topics it subscribes to that are in ``partitions``, and only
  partitions below the topic's count;
* homogeneous: no member holds more than its quota, no partition more than ``desiredSharing``
  members.

The current assignment may name members that left, topics that are gone or no longer subscribed,
or partitions beyond a topic's count: those claims are dropped (Kafka would keep a partition number
beyond the count; it is never assignable here). A subscribed topic missing from ``partitions`` is
not assignable and is ignored (Kafka's coordinator passes existing topics only).
"""

from __future__ import annotations

import math
from typing import Mapping

from oncelog.groups.assignors import member_id_order

TopicPartition = tuple[str, int]  # (topic name, partition)
ShareAssignment = dict[str, dict[str, set[int]]]  # member id -> topic -> partitions


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as a
    signed 32-bit int."""
    data = text.encode("utf-16-be", "surrogatepass")
    value = 0
    for i in range(0, len(data), 2):
        value = (31 * value + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value >> 31 else value


def simple_assign(
    members: Mapping[str, set[str]],
    partitions: Mapping[str, int],
    current: Mapping[str, Mapping[str, set[int]]] = {},  # read only
) -> ShareAssignment:
    """Kafka's ``SimpleAssignor.assign`` (see the module docstring)."""
    member_ids = sorted(members, key=member_id_order)
    if not member_ids:
        return {}
    subscriptions = {m: frozenset(members[m]) for m in member_ids}
    first = subscriptions[member_ids[0]]
    if all(subscriptions[m] == first for m in member_ids):
        by_member = _homogeneous(member_ids, first, partitions, current)
    else:
        by_member = _heterogeneous(member_ids, subscriptions, partitions, current)
    return {m: _by_topic(by_member.get(m, ())) for m in member_ids}


def _targets(topics: frozenset[str] | set[str], partitions: Mapping[str, int]) -> list[TopicPartition]:
    """The assignable partitions of ``topics``: topics by name, partitions ascending."""
    return [(t, p) for t in sorted(topics) if t in partitions for p in range(max(partitions[t], 0))]


def _current_of(member: str, topics: frozenset[str], partitions: Mapping[str, int],
                current: Mapping[str, Mapping[str, set[int]]]) -> list[TopicPartition]:
    """The member's current partitions that are still valid for ``topics``, in order."""
    held = current.get(member, {})
    return [(t, p) for t in sorted(held) if t in topics and t in partitions
            for p in sorted(held[t]) if 0 <= p < partitions[t]]


def _by_topic(tps) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for topic, partition in tps:
        out.setdefault(topic, set()).add(partition)
    return out


# ---- homogeneous -------------------------------------------------------------------------------


def _homogeneous(member_ids: list[str], topics: frozenset[str], partitions: Mapping[str, int],
                 current: Mapping[str, Mapping[str, set[int]]]) -> dict[str, set[TopicPartition]]:
    targets = _targets(topics, partitions)
    n_members, n_targets = len(member_ids), len(targets)
    if n_targets == 0:
        return {}
    sharing = (n_members + n_targets - 1) // n_targets  # desiredSharing
    precise = sharing * n_targets / n_members
    quota = [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(n_members)]

    # revokeUnassignablePartitions: only current partitions of subscribed topics count
    by_member: list[list[TopicPartition]] = [
        _current_of(m, topics, partitions, current) for m in member_ids]
    unfilled = {i for i in range(n_members) if len(by_member[i]) < quota[i]}

    # revokeOverfilledMembers: drop the first ones (in order) beyond the quota
    for i in range(n_members):
        excess = len(by_member[i]) - quota[i]
        if excess > 0:
            by_member[i] = by_member[i][excess:]

    by_partition: dict[TopicPartition, list[int]] = {tp: [] for tp in targets}
    held: list[set[TopicPartition]] = []
    for i, tps in enumerate(by_member):
        held.append(set(tps))
        for tp in tps:
            by_partition[tp].append(i)

    # revokeOversharedPartitions: the first holders (in member order) give it up
    for tp in targets:
        holders = by_partition[tp]
        while len(holders) > sharing:
            i = holders.pop(0)
            held[i].discard(tp)
            unfilled.add(i)

    # assignRemainingPartitions: one pass over the partitions, cycling through unfilled members
    queue = sorted(unfilled)
    pos = 0
    progressed = False
    for tp in targets:
        if not queue:
            break
        holders = by_partition[tp]
        while len(holders) < sharing:
            if pos >= len(queue):
                if not progressed or not queue:
                    break
                pos, progressed = 0, False
                continue
            i = queue[pos]
            if i in holders:
                pos += 1
                continue
            holders.append(i)
            held[i].add(tp)
            progressed = True
            if len(held[i]) >= quota[i]:
                del queue[pos]
            else:
                pos += 1
    return {member_ids[i]: held[i] for i in range(n_members)}


# ---- heterogeneous -----------------------------------------------------------------------------


def _heterogeneous(member_ids: list[str], subscriptions: Mapping[str, frozenset[str]],
                   partitions: Mapping[str, int],
                   current: Mapping[str, Mapping[str, set[int]]]) -> dict[str, set[TopicPartition]]:
    subscribed = {m: _targets(subscriptions[m], partitions) for m in member_ids if subscriptions[m]}
    topic_members: dict[str, list[str]] = {}
    for m in member_ids:
        for topic in sorted({t for t, _ in subscribed.get(m, ())}):
            topic_members.setdefault(topic, []).append(m)

    held_now: set[TopicPartition] = set()  # Kafka's currentAssignment keys (valid ones)
    for m in member_ids:
        for topic, ps in current.get(m, {}).items():
            held_now.update((topic, p) for p in ps)

    new: dict[TopicPartition, list[str]] = {}
    # step 1: hash each member onto one of its partitions
    for m, tps in subscribed.items():
        if tps:
            new.setdefault(tps[abs(java_string_hash(m)) % len(tps)], []).append(m)

    # step 2: round robin, topic by topic, of the partitions nobody got or holds
    free: dict[str, list[TopicPartition]] = {}
    seen: set[TopicPartition] = set()
    for tps in subscribed.values():
        for tp in tps:
            if tp not in seen:
                seen.add(tp)
                if tp not in new and tp not in held_now:
                    free.setdefault(tp[0], []).append(tp)
    for topic in sorted(free):
        subscribers = topic_members[topic]
        for k, tp in enumerate(free[topic]):
            new.setdefault(tp, []).append(subscribers[k % len(subscribers)])

    # step 3: the new placements, plus what members hold now of topics they still subscribe to
    final: dict[str, set[TopicPartition]] = {}
    for tp, ms in new.items():
        for m in ms:
            final.setdefault(m, set()).add(tp)
    for m in member_ids:
        for tp in _current_of(m, subscriptions[m], partitions, current):
            if tp not in new:
                final.setdefault(m, set()).add(tp)
    return final
