"""Classic members of KIP-848 consumer groups (Kafka 4.x's migration path,
:mod:`oncelog.groups.migration`): their partitions by topic name (as the consumer protocol's
bytes hold them, :mod:`oncelog.protocol.consumer_protocol`) <-> by topic id (as a consumer
group's records do).
"""

from __future__ import annotations

from typing import Mapping

from .consumer_state import Partitions, TopicId


def by_id(partitions: Mapping[str, frozenset[int]], topics: Mapping[str, tuple[TopicId, int]]) -> Partitions:
    """Partitions by topic name -> by topic id (topics that do not exist are left out)."""
    return {topics[t][0]: frozenset(ps) for t, ps in partitions.items() if t in topics and ps}


def by_name(partitions: Partitions, topics: Mapping[str, tuple[TopicId, int]]) -> dict[str, frozenset[int]]:
    names = {tid: name for name, (tid, _) in topics.items()}
    return {names[t]: ps for t, ps in partitions.items() if t in names}
