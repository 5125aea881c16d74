"""The server-side partition assignors of KIP-848 consumer groups: ``uniform`` (the default) and
``range``, as Kafka's group coordinator has them (``group.consumer.assignors``).

Sans-IO and pure: :meth:`Assignor.assign` takes every member's subscription and current target
assignment and the subscribed topics' partition counts, and returns the new target assignment.
The coordinator calls it whenever the group epoch moves past the assignment epoch.

Invariants of every assignor here (``tests/groups/test_assignors.py`` checks them as properties):

* the result has an entry for every member, ``{}`` when it gets nothing, and never an empty
  partition set;
* a member gets partitions only of topics it subscribes to that exist in ``topics``;
* every partition of every topic that has at least one subscriber goes to exactly one subscriber;
* the result is a function of the input's content: dict and set iteration orders do not matter.
  Members are taken in Java's ``String.compareTo`` order of their ids (UTF-16 code units) and
  topics in Kafka's ``Uuid.compareTo`` order (signed most- then least-significant halves), the
  orders Kafka's own assignor tests fix with ``TreeMap``s.

The current assignment may name topics that no longer exist, topics the member no longer
subscribes to, partitions beyond a topic's count, or a partition twice (two members' stale
targets): those claims are dropped (a partition claimed twice stays with the first member in
member order) instead of failing the assignment as Kafka would.

``uniform`` (Kafka's ``UniformAssignor``) picks one of two builders:

* every member subscribes to the same topics — Kafka 4.4's ``UniformHomogeneousAssignmentBuilder``:
  member sizes differ by at most one, and every member keeps as much of its current assignment as
  that balance allows (the fewest partitions move);
* otherwise — ``UniformHeterogeneousAssignmentBuilder``: drop what members no longer subscribe
  to, hand out the free partitions topic by topic to each topic's least-loaded subscribers, then
  move partitions from a topic's most-loaded subscribers to its least-loaded ones until every
  topic's subscribers differ by at most one (or 16 passes over the topics: with overlapping
  subscriptions the result can be almost-balanced, as Kafka documents).

``range`` (Kafka's server-side ``RangeAssignor``): for each topic, its subscribers in order —
static members first by instance id, then the others by member id — each get a range of
consecutive partitions, the first ``partitions % subscribers`` of them one more. Members with the
same subscription get the same partition numbers of equally-sized topics (co-partitioning).
Like Kafka 4.4's, it ignores the current assignment: its stability comes from that order, so a
static member that rejoins with a new member id gets its old ranges back.

Racks are not used: Kafka 4.4's uniform and range builders do not read them either.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Mapping, Protocol

TopicId = uuid.UUID
Assignment = dict[TopicId, frozenset[int]]  # one member's partitions


@dataclass(frozen=True)
class MemberSpec:
    subscribed: frozenset[TopicId]  # topics this member subscribes to (existing ones only)
    assigned: Assignment  # its current TARGET assignment (for stickiness); {} if new
    rack: str | None = None
    instance_id: str | None = None


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int


class Assignor(Protocol):
    name: str

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[TopicId, TopicSpec]
    ) -> dict[str, Assignment]: ...


# ---- orders shared with Kafka ------------------------------------------------------------------

_MASK64 = (1 << 64) - 1


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >> 63 else value


def topic_id_order(topic_id: TopicId) -> tuple[int, int]:
    """Sort key of Kafka's ``Uuid.compareTo``: the most significant 64 bits, then the least, each
    compared as a signed long (Python's ``UUID`` ordering is unsigned 128-bit)."""
    value = topic_id.int
    return _signed64(value >> 64), _signed64(value & _MASK64)


def member_id_order(member_id: str) -> bytes:
    """Sort key of Java's ``String.compareTo`` (UTF-16 code units), which orders characters above
    U+FFFF before U+E000-U+FFFF, unlike Python's code-point order."""
    return member_id.encode("utf-16-be", "surrogatepass")


def _sorted_members(members: Mapping[str, MemberSpec]) -> list[str]:
    return sorted(members, key=member_id_order)


def _subscriptions(
    members: Mapping[str, MemberSpec], topics: Mapping[TopicId, TopicSpec]
) -> dict[str, frozenset[TopicId]]:
    """Each member's subscription restricted to existing topics with partitions."""
    return {
        member_id: frozenset(t for t in spec.subscribed if t in topics and topics[t].partitions > 0)
        for member_id, spec in members.items()
    }


def _freeze(assignment: dict[TopicId, list[int] | set[int]]) -> Assignment:
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}


# ---- uniform -----------------------------------------------------------------------------------


class UniformAssignor:
    """Kafka's ``UniformAssignor``: balanced and sticky (see the module docstring)."""

    name = "uniform"

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[TopicId, TopicSpec]
    ) -> dict[str, Assignment]:
        if not members:
            return {}
        member_ids = _sorted_members(members)
        subscriptions = _subscriptions(members, topics)
        distinct = set(subscriptions.values())
        if len(distinct) == 1:
            (subscribed,) = distinct
            return _uniform_homogeneous(member_ids, members, topics, subscribed)
        return _UniformHeterogeneous(member_ids, members, topics, subscriptions).build()


def _uniform_homogeneous(
    member_ids: list[str],
    members: Mapping[str, MemberSpec],
    topics: Mapping[TopicId, TopicSpec],
    subscribed: frozenset[TopicId],
) -> dict[str, Assignment]:
    """Kafka 4.4's ``UniformHomogeneousAssignmentBuilder``, in a fixed order.

    Step 1. Quotas: ``total // members`` each, and ``total % members`` members one more.
    Step 2. In member order, each member keeps its current partitions up to its quota (lowest
            topic id, then lowest partition, first; the rest is revoked). A member offered the
            extra partition that cannot fill it with partitions it already has declines it while
            enough members remain to take the extras — so the extras go to members that keep a
            partition by them, and the fewest partitions move.
    Step 3. The partitions nobody kept go, in order, to the members below their quota: first
            those no member had, then those revoked in step 2 (in the order revoked), as Kafka.

    Kafka lists the partitions no member had in the iteration order of a ``HashSet`` of topic ids
    (an accident of hashing); we list them by descending topic id, then ascending partition —
    fixed, and the order that reproduces every exact assignment Kafka's
    ``UniformHomogeneousAssignmentBuilderTest`` asserts.
    """
    result: dict[str, Assignment] = {m: {} for m in member_ids}
    if not subscribed:
        return result
    ascending = sorted(subscribed, key=topic_id_order)
    total = sum(topics[t].partitions for t in subscribed)
    number_of_members = len(member_ids)
    minimum_quota, members_to_get_an_extra = divmod(total, number_of_members)

    claimed = {
        (topic_id, p)
        for spec in members.values()
        for topic_id, partitions in spec.assigned.items()
        if topic_id in subscribed
        for p in partitions
        if 0 <= p < topics[topic_id].partitions
    }

    # Step 2.
    owner: dict[tuple[TopicId, int], str] = {}
    revoked: list[tuple[TopicId, int]] = []
    unfilled: list[tuple[str, int]] = []
    kept: dict[str, dict[TopicId, list[int]]] = {}
    for index, member_id in enumerate(member_ids):
        quota = minimum_quota
        has_extra = members_to_get_an_extra > 0
        if has_extra:
            quota += 1
        current = members[member_id].assigned
        keep: dict[TopicId, list[int]] = {}
        for topic_id in ascending:
            partitions = current.get(topic_id)
            if not partitions:
                continue
            count = topics[topic_id].partitions
            valid = sorted(p for p in partitions if 0 <= p < count and (topic_id, p) not in owner)
            for p in valid[:quota]:
                owner[topic_id, p] = member_id
                keep.setdefault(topic_id, []).append(p)
            revoked.extend((topic_id, p) for p in valid[quota:])
            quota -= min(quota, len(valid))
        if quota > 0 and has_extra and number_of_members - index > members_to_get_an_extra:
            quota -= 1
            has_extra = False
        if quota > 0:
            unfilled.append((member_id, quota))
        if has_extra:
            members_to_get_an_extra -= 1
        kept[member_id] = keep

    # Step 3.
    free = [
        (topic_id, p)
        for topic_id in reversed(ascending)
        for p in range(topics[topic_id].partitions)
        if (topic_id, p) not in claimed
    ]
    # A partition two members claimed (stale targets) may be revoked by one and kept by the
    # other, or revoked by both: it goes out once, and only if nobody kept it.
    free.extend(tp for tp in dict.fromkeys(revoked) if tp not in owner)
    position = 0
    for member_id, quota in unfilled:
        keep = kept[member_id]
        for topic_id, p in free[position : position + quota]:
            keep.setdefault(topic_id, []).append(p)
        position += quota
    if position < len(free):  # the quotas add up to the total: a bug if this happens
        raise AssertionError(f"{len(free) - position} partitions were left unassigned")
    for member_id, keep in kept.items():
        result[member_id] = _freeze(keep)
    return result


class _Balancer:
    """Kafka's ``MemberAssignmentBalancer``: over one topic's subscribers sorted by load, a range
    of least-loaded members growing rightwards (who receive) and a range of most-loaded members
    growing leftwards (who give); balanced once the two ranges' counts differ by at most one::

                                most loaded range
                   least loaded          #
                   range      [##<-   ]##
        partitions          ##[#######]##
                   [...->  ]##[#######]##
                   [#######]##[#######]##
                     members sorted by partition count
    """

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.sorted_members: list[int] = []
        self.least_loaded_range_end = 0
        self.least_loaded_range_count = -1
        self.next_least_loaded = 0
        self.most_loaded_range_start = 0
        self.most_loaded_range_end = 0
        self.most_loaded_range_count = 1
        self.next_most_loaded = -1

    def initialize(self, members: list[int]) -> int:
        """Reset for a topic's subscribers; the difference between the most and least loaded."""
        sizes = self.sizes
        self.sorted_members = sorted(members, key=lambda i: (sizes[i], i))
        first, last = self.sorted_members[0], self.sorted_members[-1]
        self.least_loaded_range_end = 0
        self.least_loaded_range_count = sizes[first] - 1
        self.next_least_loaded = 0
        self.most_loaded_range_start = len(self.sorted_members)
        self.most_loaded_range_end = len(self.sorted_members)
        self.most_loaded_range_count = sizes[last] + 1
        self.next_most_loaded = len(self.sorted_members) - 1
        return sizes[last] - sizes[first]

    def next_least_loaded_member(self) -> int:
        """The member to give the next partition; assumes it will get one."""
        if self.next_least_loaded >= self.least_loaded_range_end:
            # The range has had one partition each: raise its level and take in the members
            # already at that level.
            self.least_loaded_range_count += 1
            while (
                self.least_loaded_range_end < len(self.sorted_members)
                and self.sizes[self.sorted_members[self.least_loaded_range_end]]
                == self.least_loaded_range_count
            ):
                self.least_loaded_range_end += 1
            self.next_least_loaded = 0
        member = self.sorted_members[self.next_least_loaded]
        self.next_least_loaded += 1
        return member

    def next_most_loaded_member(self) -> int:
        """The member to take the next partition from, or -1 when none is left to give."""
        if self.next_most_loaded < self.most_loaded_range_start:
            start = self.most_loaded_range_start
            if self.most_loaded_range_end <= start and start > 0:
                # Emptied by exclusions: restart from the next member's level so the range grows.
                self.most_loaded_range_count = self.sizes[self.sorted_members[start - 1]]
            else:
                self.most_loaded_range_count -= 1
            while (
                self.most_loaded_range_start > 0
                and self.sizes[self.sorted_members[self.most_loaded_range_start - 1]]
                == self.most_loaded_range_count
            ):
                self.most_loaded_range_start -= 1
            self.next_most_loaded = self.most_loaded_range_end - 1
        if self.next_most_loaded < 0:
            return -1
        member = self.sorted_members[self.next_most_loaded]
        self.next_most_loaded -= 1
        return member

    def exclude_most_loaded_member(self) -> None:
        """Drop the member last returned by :meth:`next_most_loaded_member` (it has nothing of
        this topic to give) by swapping it past the end of the most-loaded range."""
        members = self.sorted_members
        i, j = self.next_most_loaded + 1, self.most_loaded_range_end - 1
        members[i], members[j] = members[j], members[i]
        self.most_loaded_range_end -= 1

    def is_balanced(self) -> bool:
        return self.most_loaded_range_count - self.least_loaded_range_count <= 1


class _UniformHeterogeneous:
    """Kafka's ``UniformHeterogeneousAssignmentBuilder`` (members numbered in member order)."""

    MAX_ITERATION_COUNT = 16  # Kafka's: each pass roughly halves the imbalance

    def __init__(
        self,
        member_ids: list[str],
        members: Mapping[str, MemberSpec],
        topics: Mapping[TopicId, TopicSpec],
        subscriptions: dict[str, frozenset[TopicId]],
    ) -> None:
        self.member_ids = member_ids
        self.members = members
        self.subscriptions = subscriptions
        self.partition_counts = {t: spec.partitions for t, spec in topics.items()}
        self.topic_subscribers: dict[TopicId, list[int]] = {}
        for index, member_id in enumerate(member_ids):
            for topic_id in subscriptions[member_id]:
                self.topic_subscribers.setdefault(topic_id, []).append(index)
        self.sizes = [0] * len(member_ids)
        self.owners = {t: [-1] * self.partition_counts[t] for t in self.topic_subscribers}
        self.assignment: list[dict[TopicId, set[int]]] = [{} for _ in member_ids]

    def _topic_order(self, topic_id: TopicId) -> tuple[float, int, tuple[int, int]]:
        # Partitions per subscriber descending (as a Java double), subscriber count ascending,
        # topic id ascending.
        subscribers = len(self.topic_subscribers[topic_id])
        return (-(self.partition_counts[topic_id] / subscribers), subscribers, topic_id_order(topic_id))

    def _sorted_topics(self, topic_ids) -> list[TopicId]:
        return sorted(topic_ids, key=self._topic_order)

    def build(self) -> dict[str, Assignment]:
        if self.topic_subscribers:
            self._keep_subscribed_partitions()
            self._assign_remaining_partitions()
            self._balance()
        return {m: _freeze(self.assignment[i]) for i, m in enumerate(self.member_ids)}

    def _keep_subscribed_partitions(self) -> None:
        """Step 1: each member keeps its current partitions of topics it still subscribes to."""
        for index, member_id in enumerate(self.member_ids):
            subscribed = self.subscriptions[member_id]
            current = self.members[member_id].assigned
            for topic_id in sorted(current, key=topic_id_order):
                if topic_id not in subscribed:
                    continue
                owners = self.owners[topic_id]
                for p in sorted(current[topic_id]):
                    if 0 <= p < len(owners) and owners[p] == -1:
                        self._add(topic_id, p, index)

    def _assign_remaining_partitions(self) -> None:
        """Step 2: topic by topic, each free partition to the topic's least-loaded subscriber."""
        balancer = _Balancer(self.sizes)
        free = {
            t: [p for p, owner in enumerate(owners) if owner == -1] for t, owners in self.owners.items()
        }
        for topic_id in self._sorted_topics(t for t, ps in free.items() if ps):
            balancer.initialize(self.topic_subscribers[topic_id])
            for p in free[topic_id]:
                self._add(topic_id, p, balancer.next_least_loaded_member())

    def _balance(self) -> None:
        """Step 3: pass over the topics (with two or more subscribers) moving partitions from the
        most- to the least-loaded subscribers, until a whole pass moves nothing or 16 passes."""
        topic_ids = self._sorted_topics(t for t, s in self.topic_subscribers.items() if len(s) >= 2)
        if not topic_ids:
            return
        balancer = _Balancer(self.sizes)
        last_rebalanced = -1
        for _ in range(self.MAX_ITERATION_COUNT):
            for index, topic_id in enumerate(topic_ids):
                if index == last_rebalanced:
                    return  # a full pass since the last move
                if self._balance_topic(topic_id, balancer) > 0 or last_rebalanced == -1:
                    last_rebalanced = index

    def _balance_topic(self, topic_id: TopicId, balancer: _Balancer) -> int:
        moved = 0
        if balancer.initialize(self.topic_subscribers[topic_id]) <= 1:
            return moved
        owners = self.owners[topic_id]
        # The topic's partitions grouped by owner, so a member's last partition is found at once.
        partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}  # exclusive
        for i, p in enumerate(partitions):
            start.setdefault(owners[p], i)
            end[owners[p]] = i + 1
        while not balancer.is_balanced():
            while True:
                giver = balancer.next_most_loaded_member()
                if giver == -1:
                    break
                if end.get(giver, 0) - start.get(giver, 0) <= 0:
                    balancer.exclude_most_loaded_member()  # owns nothing of this topic
                    continue
                break
            if giver == -1:
                break
            end[giver] -= 1
            p = partitions[end[giver]]
            receiver = balancer.next_least_loaded_member()
            if balancer.is_balanced():
                break
            self._move(topic_id, p, receiver)
            moved += 1
        return moved

    def _add(self, topic_id: TopicId, p: int, index: int) -> None:
        self.assignment[index].setdefault(topic_id, set()).add(p)
        self.owners[topic_id][p] = index
        self.sizes[index] += 1

    def _move(self, topic_id: TopicId, p: int, index: int) -> None:
        old = self.owners[topic_id][p]
        if old != -1:
            partitions = self.assignment[old][topic_id]
            partitions.discard(p)
            if not partitions:
                del self.assignment[old][topic_id]
            self.sizes[old] -= 1
        self._add(topic_id, p, index)


# ---- range -------------------------------------------------------------------------------------


def range_member_order(member_id: str, spec: MemberSpec) -> tuple[int, bytes, bytes]:
    """Kafka's ``RangeAssignor.sortMemberIds``: static members first, by instance id; then the
    others by member id (the member id also breaks any tie, for a total order)."""
    if spec.instance_id is not None:
        return 0, member_id_order(spec.instance_id), member_id_order(member_id)
    return 1, b"", member_id_order(member_id)


class RangeAssignor:
    """Kafka's server-side ``RangeAssignor`` (see the module docstring)."""

    name = "range"

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[TopicId, TopicSpec]
    ) -> dict[str, Assignment]:
        order = sorted(members, key=lambda m: range_member_order(m, members[m]))
        subscriptions = _subscriptions(members, topics)
        subscribers: dict[TopicId, list[str]] = {}
        for member_id in order:
            for topic_id in subscriptions[member_id]:
                subscribers.setdefault(topic_id, []).append(member_id)
        result: dict[str, dict[TopicId, range]] = {m: {} for m in order}
        for topic_id, topic_members in subscribers.items():
            partitions = topics[topic_id].partitions
            minimum_quota, extra = divmod(partitions, len(topic_members))
            start = 0
            for position, member_id in enumerate(topic_members):
                end = start + minimum_quota + (1 if position < extra else 0)
                if start < end:
                    result[member_id][topic_id] = range(start, end)
                start = end
        return {m: _freeze(a) for m, a in result.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": UniformAssignor(), "range": RangeAssignor()}
DEFAULT_ASSIGNOR = "uniform"
