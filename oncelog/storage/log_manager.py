"""Topics and their partition logs in one data directory.

Layout of ``--data-dir``::

    meta.json                  {"format": 1, "cluster_id": ..., "node_id": N, "internal_placement": "kafka"}
                               (serve --node-id, default 1; the placement: see :attr:`LogManager.internal_placement`)
    topics.json                {name: {"topic_id": uuid, "partitions": n, "configs": {..}}}
    broker-configs.json        {"default": {..}, "broker": {..}}: dynamic broker configs (AlterConfigs on
                               the BROKER resource "" and on this node id), Kafka names and string values;
                               "default" always holds min.insync.replicas (see :data:`ELR_MIN_ISR`)
    recovery-checkpoint.json   {"topic/partition": [segment_base, position, next_offset]}
    .clean-shutdown            present only between a clean stop and the next start
    <topic>-<partition>/       segments (see :mod:`oncelog.storage.segment`), log-start-offset

``topics.json`` and the checkpoint are replaced atomically (write, fsync, rename). Topic
creation makes the partition directories before recording the topic; deletion removes the
record first, then the directories; directories of topics not in ``topics.json`` are leftovers
of an interrupted create or delete and are removed at start-up.

Logs only: what the broker derives from a log's batches (producer state, aborted transactions)
is kept by :class:`oncelog.partition.PartitionManager`, which also runs retention, and through
which a topic is deleted.

A full disk: every write here can fail (ENOSPC) and none takes the broker down or leaves a
partial file (``atomic_write`` removes its temporary file). The background tasks (checkpoint,
compaction, flush.ms) log the failure (once a minute) and go on, so they work again as soon as
space returns; a topic that cannot be created is removed again and answered
KAFKA_STORAGE_ERROR; a clean shutdown that cannot write its checkpoint leaves no
``.clean-shutdown`` marker, so the next start validates the unflushed tail.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .. import errors
from ..config import registry, settings
from ..config.settings import FsyncPolicy, LogConfig
from ..notices import notice
from .flusher import Flusher, checkpoint_points
from .files import atomic_write, fsync_dir
from .partition_log import PartitionLog, RecoveryPoint

log = logging.getLogger("oncelog.storage")

LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249
MAX_PARTITIONS = 10_000
# Kafka's Topic.isInternal: the topics the broker itself writes (a user topic may start with "__" too).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# Where a key's records go in them (oncelog.partition.internal_topic.partition_for).
PLACEMENTS = ("kafka", "legacy")


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


async def cancel_tasks(tasks: list[asyncio.Task]) -> None:
    """Cancel background tasks and wait until each has stopped (a task that failed earlier
    must not stop the shutdown)."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        try:
            await task
        except (asyncio.CancelledError, Exception):
            pass


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    overrides: dict[str, str]
    config: LogConfig
    internal: bool = False
    logs: list[PartitionLog] = field(default_factory=list)


class DataDirMismatch(RuntimeError):
    """The data directory belongs to another node (Kafka refuses to start likewise)."""


# Kafka 4.1+ clusters run with eligible leader replicas (KIP-966 ELR) on, and then: the controller
# writes a cluster-level min.insync.replicas (the static value) when none exists, the cluster-level
# one cannot be removed, and a broker-level one cannot be set. Clients see it: DescribeConfigs of
# any topic reports min.insync.replicas as DYNAMIC_DEFAULT_BROKER_CONFIG (not default), as Kafka
# 4.4 does; confluent-kafka-python's test_incremental_alter_configs expects exactly that.
ELR_MIN_ISR = "min.insync.replicas"


class LogManager:
    def __init__(self, data_dir: str, policy: FsyncPolicy, default_config: LogConfig, *,
                 static: Mapping[str, str] | None = None, node_id: int = settings.default("node.id"),
                 checkpoint_interval_ms: int = settings.default("log.flush.offset.checkpoint.interval.ms"),
                 retention_check_interval_ms: int = settings.default("log.retention.check.interval.ms"),
                 clock: Callable[[], int] | None = None) -> None:
        """``default_config``: the topic configs' broker defaults; ``static``: the broker configs
        given at start by Kafka name (:meth:`BrokerConfig.static_layer`), over those of
        ``default_config``. Settings AlterConfigs may change (producer.id.expiration.ms,
        log.cleaner.backoff.ms, num.partitions is static) are read from the layers."""
        # Wall-clock milliseconds (the broker's injected clock): compaction and flush.ms deadlines.
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.data_dir = os.path.abspath(data_dir)
        self.policy = policy
        self.default_config = default_config
        self.flusher = Flusher(policy)
        self.topics: dict[str, Topic] = {}
        self.topics_by_id: dict[uuid.UUID, Topic] = {}
        self.cluster_id = ""
        self.internal_placement = "kafka"  # set by open() from meta.json
        self.node_id = node_id
        self.checkpoint_interval_ms = checkpoint_interval_ms
        # Retention is run by oncelog.partition.PartitionManager (it trims partition state too).
        self.retention_check_interval_ms = retention_check_interval_ms
        self._tasks: list[asyncio.Task] = []
        # The broker's config layers (static: ``serve`` options; dynamic: AlterConfigs, kept in
        # broker-configs.json). Topic configs without an override take their value from these.
        self.layers = registry.BrokerLayers(static={**static_layer(default_config), **(static or {})})
        self._topic_defaults = self.layers.topic_defaults()
        self._read_broker_settings()

    # ------------------------------------------------------------------ configs

    def broker_topic_defaults(self) -> dict[str, object]:
        """Topic config -> value for topics without an override (the broker's layers)."""
        return dict(self._topic_defaults)

    def _topic_config(self, name: str, overrides: dict[str, str]) -> LogConfig:
        values, problems = registry.resolve_topic_values(overrides, self._topic_defaults)
        for problem in problems:
            log.error("topic %s: a stored config is no longer valid and is not applied: %s", name, problem)
        return LogConfig.from_values(values)

    def alter_topic_configs(self, name: str, overrides: dict[str, str | None], *, validate_only: bool) -> None:
        """Replace a topic's overrides (AlterConfigs; IncrementalAlterConfigs computes the new
        set first), validated as Kafka does, persisted, and applied to the live partitions at
        once. Kafka's order: the name, the configs, then whether the topic exists."""
        if name == "":
            raise errors.InvalidRequest("Default topic resources are not allowed.")
        validate_topic_name(name)
        topic = self.topics.get(name)
        try:
            values = registry.validate_topic_configs(overrides, self._topic_defaults,
                                                 strict=not (topic is not None and topic.internal))
        except registry.ConfigError as exc:
            raise errors.InvalidConfig(str(exc)) from None
        if topic is None:
            raise errors.UnknownTopicOrPartition(f"The topic '{name}' does not exist.")
        if validate_only:
            return
        topic.overrides = dict(overrides)
        topic.config = LogConfig.from_values(values)
        for plog in topic.logs:
            plog.update_config(topic.config)
        self._write_topics()
        log.info("topic %s configs now %s", name, topic.overrides or "{} (broker defaults)")

    def set_broker_configs(self, per_broker: bool, configs: dict[str, str | None], *, validate_only: bool,
                           named=None) -> None:
        """Replace the dynamic broker configs of one layer (the cluster default, or this broker),
        validated as Kafka's DynamicBrokerConfig does (every failure is INVALID_REQUEST there),
        persisted, and applied to every topic without an override at once. ``named``: the config
        names the request names (default: those of ``configs``), for Kafka's ELR rules on
        min.insync.replicas (INVALID_CONFIG with Kafka's messages, checked first as its
        controller does)."""
        if per_broker and ELR_MIN_ISR in (configs if named is None else named):
            raise errors.InvalidConfig("Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
        if not per_broker and configs.get(ELR_MIN_ISR) is None:
            raise errors.InvalidConfig("Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
        try:
            registry.validate_broker_configs(configs, per_broker=per_broker)
            layers = registry.BrokerLayers(static=self.layers.static,
                                       dynamic_default=self.layers.dynamic_default if per_broker else dict(configs),
                                       dynamic_broker=dict(configs) if per_broker else self.layers.dynamic_broker,
                                       defaults=self.layers.defaults)
            defaults = layers.topic_defaults()
            registry.check_topic_values(defaults)
        except (registry.RequestError, registry.ConfigError) as exc:
            raise errors.InvalidRequest(str(exc)) from None
        if validate_only:
            return
        self.layers = layers
        self._write_broker_configs()
        self._apply_broker_layers()
        log.info("dynamic broker configs (%s) now %s", f"broker {self.node_id}" if per_broker else "cluster default",
                 dict(configs) or "{}")

    def _apply_broker_layers(self) -> None:
        self._topic_defaults = self.layers.topic_defaults()
        for topic in self.topics.values():
            topic.config = self._topic_config(topic.name, topic.overrides)
            for plog in topic.logs:
                plog.update_config(topic.config)
        self._read_broker_settings()

    def _read_broker_settings(self) -> None:
        """The broker settings read from the layers (the dynamic value, else the static one,
        else the default), at start and after every AlterConfigs."""
        self.producer_id_expiration_ms = int(self.layers.value("producer.id.expiration.ms"))
        self.compaction_interval_ms = int(self.layers.value("log.cleaner.backoff.ms"))
        self.default_partitions = int(self.layers.value("num.partitions"))

    def _read_broker_configs(self) -> None:
        try:
            with open(os.path.join(self.data_dir, "broker-configs.json")) as f:
                doc = json.load(f)
        except FileNotFoundError:
            return
        self.layers.dynamic_default = dict(doc.get("default", {}))
        self.layers.dynamic_broker = dict(doc.get("broker", {}))

    def _ensure_cluster_min_isr(self) -> None:
        """Kafka's ELR activation (see :data:`ELR_MIN_ISR`): a cluster-level min.insync.replicas
        with the static value (or the default) if there is none, written once; a later change of
        the static value does not change it, as in Kafka."""
        if ELR_MIN_ISR in self.layers.dynamic_default:
            return
        value = self.layers.static.get(ELR_MIN_ISR) or self.layers.default_values()[ELR_MIN_ISR]
        self.layers.dynamic_default[ELR_MIN_ISR] = value
        try:
            self._write_broker_configs()
        except OSError as exc:  # a full disk must not stop the start: in force now, written next time
            log.error("could not record the cluster-level min.insync.replicas=%s in broker-configs.json: %s",
                      value, exc)

    def _write_broker_configs(self) -> None:
        doc = {"default": self.layers.dynamic_default, "broker": self.layers.dynamic_broker}
        atomic_write(os.path.join(self.data_dir, "broker-configs.json"), json.dumps(doc, indent=1, sort_keys=True))
        fsync_dir(self.data_dir)

    # ------------------------------------------------------------------ start / stop

    def open(self) -> None:
        # 0700: the data dir holds the SCRAM credentials and the ACLs (a directory that exists
        # keeps its mode: the operator chose it).
        os.makedirs(self.data_dir, mode=0o700, exist_ok=True)
        meta_path = os.path.join(self.data_dir, "meta.json")
        fresh = not os.path.exists(meta_path)
        if not fresh:
            with open(meta_path) as f:
                meta = json.load(f)
            if meta["node_id"] != self.node_id:
                raise DataDirMismatch(f"{meta_path} says node.id {meta['node_id']}, but this broker is configured "
                                      f"with node.id {self.node_id}: refusing to serve another node's data")
        else:
            meta = {"format": 1, "cluster_id": _cluster_id(), "node_id": self.node_id, "internal_placement": "kafka"}
            atomic_write(meta_path, json.dumps(meta))
        self.cluster_id, self.node_id = meta["cluster_id"], meta["node_id"]
        clean_marker = os.path.join(self.data_dir, ".clean-shutdown")
        clean = os.path.exists(clean_marker)
        points = self._read_checkpoint()
        started = time.monotonic()
        self._read_broker_configs()
        self._ensure_cluster_min_isr()
        self._apply_broker_layers()
        for name, spec in self._read_topics().items():
            config = self._topic_config(name, spec.get("configs", {}))
            topic = Topic(name, uuid.UUID(spec["topic_id"]), spec["partitions"], spec.get("configs", {}), config,
                          internal=name in INTERNAL_TOPICS)
            for p in range(topic.partitions):
                topic.logs.append(self._open_log(topic, p, points.get(f"{name}/{p}"), clean))
            self._register(topic)
        self._remove_leftovers()
        self._settle_internal_placement(meta_path, meta)
        if clean:
            os.unlink(clean_marker)
        logs = self.all_logs()
        # A data directory this start created has no previous shutdown to report on.
        state = "new data directory" if fresh else ("clean shutdown" if clean else "unclean shutdown")
        log.info("opened %d topic(s) in %s (%s) in %.3fs: validated %d of %d bytes", len(self.topics),
                 self.data_dir, state, time.monotonic() - started,
                 sum(p.recovery_scanned_bytes for p in logs), sum(p.size_bytes for p in logs))

    def _settle_internal_placement(self, meta_path: str, meta: dict) -> None:
        """Which partition of ``__consumer_offsets`` / ``__transaction_state`` holds a key's
        records (:func:`oncelog.partition.internal_topic.partition_for`): ``kafka`` for a data
        directory that has no internal topic yet, ``legacy`` for one whose internal topics an
        oncelog wrote before it placed keys as Kafka does (its meta.json has no placement) — its
        records stay where they are, so a group's or transaction's new records join its old ones.
        Recorded in meta.json, so the choice is made once."""
        placement = meta.get("internal_placement")
        if placement is None:
            placement = "legacy" if INTERNAL_TOPICS & set(self.topics) else "kafka"
            meta = {**meta, "internal_placement": placement}
            atomic_write(meta_path, json.dumps(meta))
        if placement not in PLACEMENTS:
            raise DataDirMismatch(f"{meta_path} says internal_placement {placement!r}; this oncelog knows "
                                  f"{', '.join(PLACEMENTS)}: refusing to place records where no reader would look")
        self.internal_placement = placement

    def _open_log(self, topic: Topic, partition: int, point: RecoveryPoint | None, clean: bool) -> PartitionLog:
        directory = os.path.join(self.data_dir, f"{topic.name}-{partition}")
        return PartitionLog.open(directory, topic.name, partition, topic.config,
                                 sync_hw=self.policy.mode == "always", recovery_point=point, clean_shutdown=clean)

    def start_background(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._checkpoint_task()))
        self._tasks.append(loop.create_task(self._compaction_task()))
        self._tasks.append(loop.create_task(self._flush_policy_task()))
        if self.policy.mode == "interval":
            self._tasks.append(loop.create_task(self.flusher.interval_task()))

    async def close(self) -> None:
        await cancel_tasks(self._tasks)
        for plog in self.all_logs():
            self.flusher._dirty[plog] = None
        rounds = self.flusher.rounds
        await self.flusher.run_round(full=True)
        clean = self.flusher.rounds > rounds  # the final fsync round succeeded
        try:
            self.write_checkpoint()
        except OSError as exc:
            log.error("cannot write the recovery checkpoint at shutdown: %r; the next start validates the logs", exc)
            clean = False
        for plog in self.all_logs():
            plog.close()
        if clean:
            try:
                atomic_write(os.path.join(self.data_dir, ".clean-shutdown"), "")
            except OSError as exc:
                log.error("cannot mark a clean shutdown: %r; the next start validates the logs", exc)

    # ------------------------------------------------------------------ persistence

    def _read_topics(self) -> dict:
        try:
            with open(os.path.join(self.data_dir, "topics.json")) as f:
                return json.load(f)
        except FileNotFoundError:
            return {}

    def _write_topics(self) -> None:
        doc = {t.name: {"topic_id": str(t.topic_id), "partitions": t.partitions, "configs": t.overrides}
               for t in self.topics.values()}
        atomic_write(os.path.join(self.data_dir, "topics.json"), json.dumps(doc, indent=1, sort_keys=True))
        fsync_dir(self.data_dir)

    def _read_checkpoint(self) -> dict[str, RecoveryPoint]:
        try:
            with open(os.path.join(self.data_dir, "recovery-checkpoint.json")) as f:
                raw = json.load(f)
        except (FileNotFoundError, ValueError):
            return {}
        return {k: RecoveryPoint(*v) for k, v in raw.items()}

    def write_checkpoint(self) -> None:
        points = checkpoint_points(self.all_logs())
        doc = {k: [p.segment_base, p.position, p.next_offset] for k, p in points.items()}
        atomic_write(os.path.join(self.data_dir, "recovery-checkpoint.json"), json.dumps(doc))

    def _remove_leftovers(self) -> None:
        expected = {f"{t.name}-{p}" for t in self.topics.values() for p in range(t.partitions)}
        for name in os.listdir(self.data_dir):
            path = os.path.join(self.data_dir, name)
            if os.path.isdir(path) and name not in expected:
                log.warning("removing %s: not a partition of any topic (interrupted create or delete)", path)
                shutil.rmtree(path, ignore_errors=True)

    async def _checkpoint_task(self) -> None:
        while True:
            await asyncio.sleep(self.checkpoint_interval_ms / 1000)
            try:
                await asyncio.get_running_loop().run_in_executor(None, self.write_checkpoint)
            except OSError as exc:
                background_failed("recovery checkpoint", exc)

    async def _compaction_task(self) -> None:
        while True:
            await asyncio.sleep(self.compaction_interval_ms / 1000)
            try:
                await self.compact_now()
            except OSError as exc:
                background_failed("compaction", exc)

    async def compact_now(self) -> int:
        """Compact the partitions of compacted topics that need it: dirty share at least
        min.cleanable.dirty.ratio, or dirty data older than max.compaction.lag.ms. Runs on the
        event loop, under the flusher lock: closed segments are rewritten while nothing else
        touches them. One partition at a time, the loop serving requests in between (a pass
        over all of ``__transaction_state`` with a million ids in it is seconds of work)."""
        from .cleaner import compact, needs_compaction

        saved = 0
        now = self.clock()
        for topic in list(self.topics.values()):
            if not topic.config.compact:
                continue
            for plog in list(topic.logs):
                async with self.flusher.lock:
                    if not plog.deleted and needs_compaction(plog, now):
                        saved += compact(plog, now)
                await asyncio.sleep(0)
        if saved:
            log.info("compaction saved %d bytes", saved)
        return saved

    def after_append(self, plog: PartitionLog, now_ms: int) -> None:
        """flush.messages: under ``--fsync interval``/``never`` a partition that reached its
        limit is flushed now (``always`` flushes every append anyway)."""
        if self.policy.mode != "always" and plog.flush_due(now_ms):
            self.flusher.request_round(plog)

    async def _flush_policy_task(self) -> None:
        """flush.ms under ``--fsync interval``/``never``: partitions whose oldest unflushed
        append is older than their topic's flush.ms are flushed."""
        if self.policy.mode == "always":
            return
        while True:
            limits = [t.config.flush_ms for t in self.topics.values() if t.config.flush_ms < registry.LONG_MAX]
            await asyncio.sleep(min(max(min(limits, default=1000), 10), 1000) / 1000)
            now = self.clock()
            for topic in list(self.topics.values()):
                if topic.config.flush_ms < registry.LONG_MAX or topic.config.flush_messages < registry.LONG_MAX:
                    for plog in topic.logs:
                        if plog.flush_due(now):
                            self.flusher.request_round(plog)

    # ------------------------------------------------------------------ topics

    def _register(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.topics_by_id[topic.topic_id] = topic

    def all_logs(self) -> list[PartitionLog]:
        return [plog for t in self.topics.values() for plog in t.logs]

    def get_log(self, topic: str, partition: int) -> PartitionLog:
        t = self.topics.get(topic)
        if t is None or not 0 <= partition < t.partitions:
            raise errors.UnknownTopicOrPartition(f"{topic}-{partition} does not exist")
        return t.logs[partition]

    def check_new_topic(self, name: str, partitions: int, replication_factor: int,
                        configs: dict[str, str | None], *, strict: bool = True) -> LogConfig:
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
        try:
            config = LogConfig.from_values(registry.validate_topic_configs(configs, self._topic_defaults, strict=strict))
        except registry.ConfigError as exc:
            raise errors.InvalidConfig(str(exc)) from None
        if replication_factor < -1 or replication_factor == 0:
            raise errors.InvalidReplicationFactor(
                "Replication factor must be larger than 0, or -1 to use the default value.")
        if partitions < -1 or partitions == 0:
            raise errors.InvalidPartitions("Number of partitions was set to an invalid non-positive value.")
        if partitions == -1:
            partitions = self.default_partitions
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
                     configs: dict[str, str | None] | None = None, *, validate_only: bool = False,
                     strict: bool = True) -> Topic:
        """``strict=False`` for topics the broker creates itself (no 1 MiB minimum of
        segment.bytes: see :func:`oncelog.config.registry.validate_topic_configs`)."""
        configs = {k: v for k, v in (configs or {}).items()}
        config = self.check_new_topic(name, partitions, replication_factor, configs, strict=strict)
        if partitions == -1:
            partitions = self.default_partitions
        topic = Topic(name, uuid.uuid4(), partitions, {k: v for k, v in configs.items() if v is not None},
                      config, internal=name in INTERNAL_TOPICS)
        if validate_only:
            return topic
        try:
            for p in range(partitions):
                topic.logs.append(self._open_log(topic, p, None, False))
            self._register(topic)
            self._write_topics()
        except OSError as exc:
            # Undone whole (a full disk): no directory or registration is left for a topic the
            # client was told does not exist.
            self.topics.pop(name, None)
            self.topics_by_id.pop(topic.topic_id, None)
            for plog in topic.logs:
                plog.close()
            for p in range(partitions):
                shutil.rmtree(os.path.join(self.data_dir, f"{name}-{p}"), ignore_errors=True)
            raise errors.KafkaStorageError(f"cannot create topic {name} in {self.data_dir}: {exc.strerror or exc}") \
                from exc
        log.info("created topic %s with %d partition(s)", name, partitions)
        return topic

    async def delete_topic(self, name: str) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise errors.UnknownTopicOrPartition(f"topic {name!r} does not exist")
        del self.topics[name]
        del self.topics_by_id[topic.topic_id]
        self._write_topics()
        async with self.flusher.lock:
            for plog in topic.logs:
                self.flusher._dirty.pop(plog, None)
                plog.delete_all()
        log.info("deleted topic %s", name)

    def create_partitions(self, name: str, count: int, *, validate_only: bool = False) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise errors.UnknownTopicOrPartition(f"topic {name!r} does not exist")
        if count == topic.partitions:  # Kafka's messages (ReplicationControlManager.createPartitions)
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
            for p in range(before, count):
                topic.logs.append(self._open_log(topic, p, None, False))
            topic.partitions = count
            self._write_topics()
        except OSError as exc:  # undone whole, as a topic creation
            for plog in topic.logs[before:]:
                plog.close()
            del topic.logs[before:]
            topic.partitions = before
            for p in range(before, count):
                shutil.rmtree(os.path.join(self.data_dir, f"{name}-{p}"), ignore_errors=True)
            raise errors.KafkaStorageError(f"cannot add partitions to {name} in {self.data_dir}: "
                                           f"{exc.strerror or exc}") from exc


def background_failed(what: str, exc: OSError) -> None:
    """A background write failed (a full disk): said once a minute; the task goes on."""
    notice(log, "%s failed: %r; retried on the next run", what, exc, level=logging.WARNING,
           key=("storage-background", what))


def static_layer(config: LogConfig) -> dict[str, str]:
    """The broker configs a static LogConfig (``serve`` options) sets: each topic config whose
    value is not Kafka's default, under its first broker synonym (log.roll.ms for segment.ms)."""
    out = {}
    default = LogConfig()
    for name, c in registry.TOPIC_CONFIGS.items():
        value = getattr(config, c.attr)
        if c.synonyms and value != getattr(default, c.attr):
            out[c.synonyms[0].name] = registry.to_wire(value, c.type)
    return out


def _cluster_id() -> str:
    import base64
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
