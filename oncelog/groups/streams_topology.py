"""A streams group's topology (KIP-1071): what a Kafka Streams member sends when it joins, its
checks, and its configuration against the topics that exist (Kafka 4.4's
``streams/topics/InternalTopicManager.configureTopics``). Pure: no I/O, no clock.

* :class:`Topology`, :class:`Subtopology`, :class:`TopicInfo` — the topology as sent (and as
  stored in the ``StreamsGroupTopology`` record), immutable and comparable.
* :func:`check_topology` — the checks before the group is touched, with Kafka's errors and
  messages: a changelog with a partition count (STREAMS_INVALID_TOPOLOGY), a source regex
  (INVALID_REQUEST "not supported yet"), Kafka-internal or invalid topic names
  (STREAMS_INVALID_TOPOLOGY, as KafkaApis). Beyond Kafka, the size is bounded
  (:data:`MAX_SUBTOPOLOGIES`, :data:`MAX_TOPICS`, :data:`MAX_TOPIC_CONFIGS`) and a copartition
  group's index must name a topic of its subtopology: both STREAMS_INVALID_TOPOLOGY here
  (Kafka has no bound; an index out of range fails there with an unexpected exception).
* :func:`configure` — Kafka's order of steps (facts §4.1): missing source topics (status 1),
  repartition partition counts (a fix-point; a loop is STREAMS_INVALID_TOPOLOGY), copartition
  groups (status 2), changelog counts, the number of tasks per subtopology, then the internal
  topics that exist with another count (status 2) or are missing (status 3, and the broker
  creates them: :attr:`Configured.to_create`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Mapping

from .. import errors
from ..metadata.topics import validate_topic_name

MAX_SUBTOPOLOGIES = 1000
MAX_TOPICS = 10_000  # topic names over the whole topology (each list of each subtopology)
MAX_TOPIC_CONFIGS = 200  # configs per internal topic
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state")

# Status codes of StreamsGroupHeartbeatResponse (Kafka's StreamsGroupHeartbeatResponse.Status)
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5


class StreamsInvalidTopology(errors.KafkaError):
    """STREAMS_INVALID_TOPOLOGY (130): registered in :data:`oncelog.errors.ERROR_CODES` below."""


def _register() -> None:
    from kio.schema.errors import ErrorCode
    errors.ERROR_CODES.setdefault(StreamsInvalidTopology, ErrorCode.streams_invalid_topology)


_register()


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int = 0  # 0: undecided (always for changelogs)
    replication_factor: int = 0  # 0 or -1: the broker's default
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    # each: (source topic indexes, source regex indexes, repartition source indexes)
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]

    def required_topics(self) -> set[str]:
        """Source, repartition-source and changelog topics (Kafka's requiredTopics)."""
        out: set[str] = set()
        for s in self.subtopologies:
            out.update(s.source_topics)
            out.update(t.name for t in s.repartition_source_topics)
            out.update(t.name for t in s.state_changelog_topics)
        return out

    def all_topics(self) -> list[str]:
        """Every topic the topology names (the ACL and name checks' list, KafkaApis), deduplicated."""
        names: dict[str, None] = {}
        for s in self.subtopologies:
            for n in (*s.source_topics, *s.repartition_sink_topics, *(t.name for t in s.repartition_source_topics),
                      *(t.name for t in s.state_changelog_topics)):
                names[n] = None
        return list(names)

    def source_topic_map(self) -> dict[str, str]:
        """Source and repartition-source topic -> subtopology id (offset commit checks)."""
        out: dict[str, str] = {}
        for s in self.subtopologies:
            for n in (*s.source_topics, *(t.name for t in s.repartition_source_topics)):
                out.setdefault(n, s.subtopology_id)
        return out


def check_topology(topology: Topology) -> None:
    """The checks of a joining member's topology, in Kafka's order; raises."""
    if len(topology.subtopologies) > MAX_SUBTOPOLOGIES:
        raise StreamsInvalidTopology(f"The topology has {len(topology.subtopologies)} subtopologies, more than "
                                     f"{MAX_SUBTOPOLOGIES}.")
    count = 0
    seen_ids: set[str] = set()
    for s in topology.subtopologies:
        count += (len(s.source_topics) + len(s.repartition_sink_topics) + len(s.repartition_source_topics)
                  + len(s.state_changelog_topics) + len(s.source_topic_regex))
        if count > MAX_TOPICS:
            raise StreamsInvalidTopology(f"The topology names more than {MAX_TOPICS} topics.")
        if s.subtopology_id in seen_ids:
            raise StreamsInvalidTopology(f"Subtopology {s.subtopology_id} is defined more than once.")
        seen_ids.add(s.subtopology_id)
        for t in (*s.state_changelog_topics, *s.repartition_source_topics):
            if len(t.configs) > MAX_TOPIC_CONFIGS:
                raise StreamsInvalidTopology(f"Topic {t.name} has more than {MAX_TOPIC_CONFIGS} configs.")
    # GroupCoordinatorService.throwIfInvalidTopology
    for s in topology.subtopologies:
        for t in s.state_changelog_topics:
            if t.partitions != 0:
                raise StreamsInvalidTopology(f"Changelog topic {t.name} must have an undefined partition count, "
                                             f"but it is set to {t.partitions}.")
    # throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures
    for s in topology.subtopologies:
        if s.source_topic_regex:
            raise errors.InvalidRequest("Regular expressions for source topics are not supported yet.")
    for s in topology.subtopologies:
        for g in s.copartition_groups:
            if (any(not 0 <= i < len(s.source_topics) for i in g[0]) or any(not 0 <= i < len(s.source_topic_regex)
                                                                          for i in g[1])
                    or any(not 0 <= i < len(s.repartition_source_topics) for i in g[2])):
                raise StreamsInvalidTopology(f"A copartition group of subtopology {s.subtopology_id} names a topic "
                                             "index out of range.")


def check_topic_names(names: list[str]) -> None:
    """KafkaApis.handleStreamsGroupHeartbeat: internal topics, then invalid names."""
    internal = [n for n in names if n in INTERNAL_TOPICS]
    if internal:
        raise StreamsInvalidTopology(f"Use of Kafka internal topics {','.join(internal)} in a Kafka Streams "
                                     "topology is prohibited.")
    invalid = []
    for n in names:
        try:
            validate_topic_name(n)
        except errors.InvalidTopic:
            invalid.append(n)
    if invalid:
        raise StreamsInvalidTopology(f"Topic names {','.join(invalid)} are not valid topic names.")


@dataclass(frozen=True)
class Configured:
    """The topology against the topics: ``tasks`` subtopology id -> number of tasks (empty when
    source topics are missing); ``statuses`` [(code, detail)]; ``ready`` when no status stands."""
    tasks: dict[str, int] = field(default_factory=dict)
    statuses: tuple[tuple[int, str], ...] = ()
    to_create: tuple[tuple[str, int, int, tuple[tuple[str, str], ...]], ...] = ()  # name, partitions, rf, configs
    partition_counts: dict[str, int] = field(default_factory=dict)  # internal topic -> decided count

    @property
    def ready(self) -> bool:
        return not self.statuses


def _names(topics: list[str]) -> str:
    shown = topics[:3]
    text = ", ".join(shown)
    if len(topics) > 3:
        return f"{text} and {len(topics) - 3} additional topics"
    return text


def _incorrect(status: tuple[int, str]) -> Configured:
    # a TopicConfigurationException in Kafka: the first one found stands, no tasks
    return Configured(statuses=(status,))


def configure(topology: Topology, topics: Mapping[str, tuple]) -> Configured:
    """``topics``: name -> (topic id, partition count) of every topic now. Raises
    StreamsInvalidTopology where Kafka's configureTopics does (the heartbeat fails)."""
    subs = topology.subtopologies
    # Step 1. Missing source topics.
    missing = sorted({n for s in subs for n in s.source_topics if n not in topics})
    if missing:
        return Configured(statuses=((MISSING_SOURCE_TOPICS, f"Source topics {_names(missing)} are missing."),))

    def existing(name: str) -> int | None:
        found = topics.get(name)
        return found[1] if found is not None else None

    # Step 2. Repartition topics' partition counts (RepartitionTopics.setup).
    decided: dict[str, int] = {t.name: t.partitions for s in subs for t in s.repartition_source_topics
                               if t.partitions != 0}
    repartition = {t.name for s in subs for t in s.repartition_source_topics}
    sinks = {n for s in subs for n in s.repartition_sink_topics}

    def count_of(name: str) -> int | None:
        e = existing(name)
        return e if e is not None else decided.get(name)

    unknown = {n for n in repartition if n not in decided}
    while unknown:
        progress = False
        for s in subs:
            for sink in s.repartition_sink_topics:
                if sink not in unknown:
                    continue
                counts = [c for c in (count_of(t.name) for t in s.repartition_source_topics) if c]
                counts += [c for c in (existing(n) for n in s.source_topics) if c]
                if counts:
                    decided[sink] = max(counts)
                    unknown.discard(sink)
                    progress = True
        if not progress:
            never = sorted(n for n in unknown if n not in sinks)
            if never:
                raise StreamsInvalidTopology(
                    f"Failed to compute the number of partitions for repartition topics {never}: a repartition "
                    "source topic is never used as a sink topic.")
            raise StreamsInvalidTopology(
                f"Failed to compute the number of partitions for repartition topics {sorted(unknown)}. There may be "
                "loops between the subtopologies, or a repartition topic not written to.")
    statuses: list[tuple[int, str]] = []
    # Step 3. Copartition groups (CopartitionedTopicsEnforcer.enforce).
    fixed = {t.name for s in subs for t in s.repartition_source_topics if t.partitions != 0}
    for s in subs:
        for g in s.copartition_groups:
            names = [s.source_topics[i] for i in g[0]] + [s.repartition_source_topics[i].name for i in g[2]]
            external = [n for n in names if n not in repartition]
            internal = [n for n in names if n in repartition]
            if external:
                counts = {n: existing(n) or 0 for n in external}
                if len(set(counts.values())) > 1:
                    return _incorrect((INCORRECTLY_PARTITIONED_TOPICS, "Following topics do not have the same "
                                       "number of partitions: "
                                       f"[{', '.join(f'{n}:{c}' for n, c in sorted(counts.items()))}]"))
                want = next(iter(counts.values()))
                for n in internal:
                    if n in fixed and decided.get(n) != want:
                        return _incorrect((INCORRECTLY_PARTITIONED_TOPICS, f"Number of partitions [{decided.get(n)}] "
                                         f"of repartition topic [{n}] doesn't match number of partitions [{want}] of "
                                         "the source topic."))
                    decided[n] = want
            elif internal:
                fixed_counts = {decided[n] for n in internal if n in fixed}
                if len(fixed_counts) > 1:
                    return _incorrect((INCORRECTLY_PARTITIONED_TOPICS, "Following topics do not have the same "
                                       f"number of partitions: [{', '.join(sorted(internal))}]"))
                want = fixed_counts.pop() if fixed_counts else max(decided.get(n, 0) for n in internal)
                if want == 0:
                    raise StreamsInvalidTopology(f"No partition count found for copartitioned topics {sorted(internal)}.")
                for n in internal:
                    decided[n] = want
    # Steps 4 and 5. Changelog counts; tasks per subtopology.
    tasks: dict[str, int] = {}
    to_create = []
    for s in subs:
        counts = [c for c in (existing(n) for n in s.source_topics) if c]
        counts += [c for c in (count_of(t.name) for t in s.repartition_source_topics) if c]
        if not counts:
            raise StreamsInvalidTopology(f"Subtopology {s.subtopology_id} has no source topic with a partition "
                                         "count.")
        tasks[s.subtopology_id] = max(counts)
        for t in s.state_changelog_topics:
            decided[t.name] = tasks[s.subtopology_id]
    # Step 6. Internal topics: wrongly partitioned, or missing (the broker creates them).
    missing_internal = []
    seen: set[str] = set()
    for s in subs:
        for t in (*s.repartition_source_topics, *s.state_changelog_topics):
            if t.name in seen:
                continue
            seen.add(t.name)
            want = decided[t.name]
            have = existing(t.name)
            if have is None:
                missing_internal.append(t.name)
                rf = t.replication_factor if t.replication_factor not in (0,) else -1
                to_create.append((t.name, want, rf, t.configs))
            elif have != want:
                return _incorrect((INCORRECTLY_PARTITIONED_TOPICS, f"Existing topic {t.name} has different number of "
                                 f"partitions: expected {want}, found {have}"))
    if missing_internal:
        statuses.append((MISSING_INTERNAL_TOPICS, f"Internal topics are missing: {sorted(missing_internal)}"))
    return Configured(tasks=tasks, statuses=tuple(statuses), to_create=tuple(to_create), partition_counts=decided)


def metadata_hash(topology: Topology | None, topics: Mapping[str, tuple]) -> int:
    """A hash of the required topics that exist (name, id, partitions): when it changes the
    topology is configured again and the group epoch bumped (Kafka's metadataHash)."""
    if topology is None:
        return 0
    items = tuple(sorted((n, str(topics[n][0]), topics[n][1]) for n in topology.required_topics() if n in topics))
    if not items:
        return 0
    return int.from_bytes(hashlib.blake2b(repr(items).encode(), digest_size=8).digest(), "big") >> 1
