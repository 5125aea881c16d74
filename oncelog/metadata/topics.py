"""The topic registry: which topics exist, their ids, partition counts and config overrides.

Document ``topics.json``: ``{name: {"topic_id": uuid, "partitions": n, "configs": {..}}}`` (the
overrides, Kafka names and the strings the request gave).

A change here has two halves, the record (``topics.json``) and the logs (the partition
directories, made and removed by the storage layer through :class:`TopicLogs`). Their order is
what makes a crash at any moment safe:

* **create** (and add partitions): 1. validate (Kafka's order and messages), 2. the logs are made,
  3. the record is written, 4. the topic is in the registry. A crash before step 3 leaves
  directories no record names: leftovers, removed at the next start
  (:meth:`oncelog.storage.log_manager.LogManager.open`). A failed step 2 or 3 (a full disk)
  removes what step 2 made and answers KAFKA_STORAGE_ERROR: no directory or registration is
  left for a topic the client was told does not exist.
* **delete**: 1. the topic leaves the registry, 2. the record is written, 3. the logs are deleted.
  A crash after step 2 leaves leftovers again; before it, the topic is whole.
* **alter configs**: validated whole, written, then applied to the live logs.

Every request error of these operations (INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS,
INVALID_CONFIG, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, UNKNOWN_TOPIC_OR_PARTITION,
INVALID_REQUEST) is raised here, with Kafka's message; the storage layer below raises none.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from .. import errors
from ..config.settings import LogConfig
from .configs import LiveConfigs
from .store import TOPICS, MetadataStore

log = logging.getLogger("oncelog.metadata")

LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249
MAX_PARTITIONS = 10_000
# Kafka's Topic.isInternal: the topics the broker itself writes (a user topic may start with "__" too).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def validate_topic_name(name: str | None) -> None:
    """Kafka's Topic.validate, its checks in its order and with its messages."""
    if not name:
        raise errors.InvalidTopic("Topic name is invalid: the empty string is not allowed")
    if name in (".", ".."):
        raise errors.InvalidTopic(f"Topic name is invalid: '{name}' is not allowed")
    if len(name) > MAX_TOPIC_NAME:
        raise errors.InvalidTopic(
            f"Topic name is invalid: the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME}")
    if not LEGAL_TOPIC.match(name):
        raise errors.InvalidTopic(f"Topic name is invalid: '{name}' contains one or more characters other than "
                                  "ASCII alphanumerics, '.', '_' and '-'")


@dataclass
class Topic:
    """A topic as the metadata knows it. ``config``: the overrides resolved over the broker's
    layers (what its logs use)."""
    name: str
    topic_id: uuid.UUID
    partitions: int
    overrides: dict[str, str]
    config: LogConfig
    internal: bool = False


class TopicLogs(Protocol):
    """What the registry asks of the logs (:class:`oncelog.partition.PartitionManager`)."""

    def create_logs(self, name: str, partitions: range, config: LogConfig, *, internal: bool) -> None:
        """Make and open the logs (raises OSError after removing what it made)."""

    def remove_logs(self, name: str, start: int) -> None:
        """Undo a create: close and remove the logs of partitions ``start`` and up."""

    async def delete_logs(self, name: str) -> None: ...

    def update_config(self, name: str, config: LogConfig) -> None: ...


class TopicRegistry:
    def __init__(self, store: MetadataStore, configs: LiveConfigs) -> None:
        self.store = store
        self.configs = configs
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        self.logs: TopicLogs | None = None  # wired by the broker: where a change's logs half goes
        configs.on_change.append(self._reresolve)

    # ------------------------------------------------------------------ reading

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self.topics

    def __iter__(self):
        return iter(self.topics)

    def __len__(self) -> int:
        return len(self.topics)

    def values(self) -> Iterable[Topic]:
        return self.topics.values()

    def load(self) -> None:
        """Read ``topics.json`` (at start, and a follower's reload)."""
        topics: dict[str, Topic] = {}
        for name, spec in self.store.read(TOPICS, {}).items():
            overrides = dict(spec.get("configs", {}))
            topics[name] = Topic(name, uuid.UUID(spec["topic_id"]), spec["partitions"], overrides,
                                 self.configs.topic_config(name, overrides), internal=name in INTERNAL_TOPICS)
        self.topics = topics
        self.by_id = {t.topic_id: t for t in topics.values()}

    def _write(self) -> None:
        doc = {t.name: {"topic_id": str(t.topic_id), "partitions": t.partitions, "configs": t.overrides}
               for t in self.topics.values()}
        self.store.write(TOPICS, doc)

    def _reresolve(self) -> None:
        """The broker's layers changed: every topic's config, re-resolved and applied."""
        for topic in self.topics.values():
            topic.config = self.configs.topic_config(topic.name, topic.overrides)
            if self.logs is not None:
                self.logs.update_config(topic.name, topic.config)

    # ------------------------------------------------------------------ create

    def check_new_topic(self, name: str, partitions: int, replication_factor: int,
                        configs: Mapping[str, str | None], *, strict: bool = True) -> LogConfig:
        """Kafka's order and messages (ReplicationControlManager.createTopics): the name, whether
        it exists, the configs, then replication factor and partitions (each at most 0 or below -1
        first, then the placement: more replicas than the one broker)."""
        error: errors.KafkaError | None = None
        try:
            validate_topic_name(name)
        except errors.InvalidTopic as exc:
            error = exc
        colliding = self._colliding(name)
        if colliding is not None:
            error = errors.InvalidTopic(f"Topic '{name}' collides with existing topic: {colliding}")
        if name in self.topics:
            error = errors.TopicAlreadyExists(f"Topic '{name}' already exists.")
        if error is not None:
            raise error
        config = self.configs.validate_topic_configs(configs, strict=strict)
        if replication_factor < -1 or replication_factor == 0:
            raise errors.InvalidReplicationFactor(
                "Replication factor must be larger than 0, or -1 to use the default value.")
        if partitions < -1 or partitions == 0:
            raise errors.InvalidPartitions("Number of partitions was set to an invalid non-positive value.")
        if partitions == -1:
            partitions = self.configs.default_partitions
        if partitions > MAX_PARTITIONS:  # oncelog's own bound (Kafka's is the controller's record limit)
            raise errors.InvalidPartitions(f"number of partitions must be 1..{MAX_PARTITIONS}, got {partitions}")
        if replication_factor > 1:
            raise errors.InvalidReplicationFactor(
                f"Unable to replicate the partition {replication_factor} time(s): The target replication factor "
                f"of {replication_factor} cannot be reached because only 1 broker(s) are registered or some "
                "brokers have all their log directories cordoned.")
        return config

    def _colliding(self, name: str) -> str | None:
        """An existing topic whose name equals ``name`` once '.' and '_' are the same (metric
        names cannot tell them apart): Kafka refuses the new one (validateNewTopicNames)."""
        if not name or ("." not in name and "_" not in name):
            return None
        unified = name.replace(".", "_")
        return next((t for t in self.topics if ("." in t or "_" in t) and t.replace(".", "_") == unified), None)

    def create_topic(self, name: str, partitions: int, replication_factor: int = -1,
                     configs: Mapping[str, str | None] | None = None, *, validate_only: bool = False,
                     strict: bool = True) -> Topic:
        """The create of the module docstring. ``partitions=-1``: ``num.partitions``.
        ``strict=False`` for topics the broker creates itself (no 1 MiB minimum of
        segment.bytes: see :func:`oncelog.config.registry.validate_topic_configs`)."""
        # Step 1. Validate.
        configs = dict(configs or {})
        config = self.check_new_topic(name, partitions, replication_factor, configs, strict=strict)
        if partitions == -1:
            partitions = self.configs.default_partitions
        topic = Topic(name, uuid.uuid4(), partitions, {k: v for k, v in configs.items() if v is not None},
                      config, internal=name in INTERNAL_TOPICS)
        if validate_only:
            return topic
        try:
            # Step 2. The logs.
            self._logs().create_logs(name, range(partitions), config, internal=topic.internal)
            # Steps 3 and 4. The record, then the registry.
            self.topics[name] = topic
            self.by_id[topic.topic_id] = topic
            try:
                self._write()
            except OSError:
                del self.topics[name], self.by_id[topic.topic_id]
                self._logs().remove_logs(name, 0)
                raise
        except OSError as exc:
            raise errors.KafkaStorageError(f"cannot create topic {name} in {self.store.data_dir}: "
                                           f"{exc.strerror or exc}") from exc
        log.info("created topic %s with %d partition(s)", name, partitions)
        return topic

    def ensure_internal(self, name: str, partitions: int, configs: Mapping[str, str]) -> int:
        """An internal topic (``__consumer_offsets``, ``__transaction_state``): created with
        ``configs`` if missing; its partition count."""
        topic = self.topics.get(name)
        if topic is None:
            topic = self.create_topic(name, partitions, configs=configs, strict=False)
        return topic.partitions

    def create_partitions(self, name: str, count: int, *, validate_only: bool = False) -> None:
        """Kafka's checks and messages (ReplicationControlManager.createPartitions), then the
        create's steps 2–4 for the new partitions."""
        topic = self.topics.get(name)
        if topic is None:
            raise errors.UnknownTopicOrPartition(f"topic {name!r} does not exist")
        if count == topic.partitions:
            raise errors.InvalidPartitions(f"Topic already has {topic.partitions} partition(s).")
        if count < topic.partitions:
            raise errors.InvalidPartitions(f"The topic {name} currently has {topic.partitions} partition(s); "
                                           f"{count} would not be an increase.")
        if count > MAX_PARTITIONS:
            raise errors.InvalidPartitions(f"number of partitions must be at most {MAX_PARTITIONS}")
        if validate_only:
            return
        before = topic.partitions
        try:
            self._logs().create_logs(name, range(before, count), topic.config, internal=topic.internal)
            topic.partitions = count
            try:
                self._write()
            except OSError:
                topic.partitions = before
                self._logs().remove_logs(name, before)
                raise
        except OSError as exc:
            raise errors.KafkaStorageError(f"cannot add partitions to {name} in {self.store.data_dir}: "
                                           f"{exc.strerror or exc}") from exc

    # ------------------------------------------------------------------ delete

    async def delete_topic(self, name: str) -> None:
        """The delete of the module docstring."""
        topic = self.topics.get(name)
        if topic is None:
            raise errors.UnknownTopicOrPartition(f"topic {name!r} does not exist")
        del self.topics[name], self.by_id[topic.topic_id]
        try:
            self._write()
        except OSError as exc:
            self.topics[name], self.by_id[topic.topic_id] = topic, topic
            raise errors.KafkaStorageError(f"cannot delete topic {name}: {exc.strerror or exc}") from exc
        await self._logs().delete_logs(name)
        log.info("deleted topic %s", name)

    # ------------------------------------------------------------------ configs

    def alter_topic_configs(self, name: str, overrides: dict[str, str | None], *, validate_only: bool) -> None:
        """Replace a topic's overrides (AlterConfigs; IncrementalAlterConfigs computes the new
        set first), validated as Kafka does, persisted, and applied to the live partitions at
        once. Kafka's order: the name, the configs, then whether the topic exists."""
        if name == "":
            raise errors.InvalidRequest("Default topic resources are not allowed.")
        validate_topic_name(name)
        topic = self.topics.get(name)
        config = self.configs.validate_topic_configs(overrides, strict=not (topic is not None and topic.internal))
        if topic is None:
            raise errors.UnknownTopicOrPartition(f"The topic '{name}' does not exist.")
        if validate_only:
            return
        before = topic.overrides, topic.config
        topic.overrides, topic.config = dict(overrides), config
        try:
            self._write()
        except OSError as exc:
            topic.overrides, topic.config = before
            raise errors.KafkaStorageError(f"cannot write the configs of {name}: {exc.strerror or exc}") from exc
        self._logs().update_config(name, config)
        log.info("topic %s configs now %s", name, topic.overrides or "{} (broker defaults)")

    def _logs(self) -> TopicLogs:
        if self.logs is None:
            raise RuntimeError("the topic registry has no logs wired: a follower cannot change topics")
        return self.logs
