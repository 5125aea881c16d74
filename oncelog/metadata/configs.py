"""The live config layers: the broker's configs as they are now, and each group's own.

:class:`LiveConfigs` is the one object the broker reads a dynamic setting from
(``num.partitions``, ``log.cleaner.backoff.ms``, ``producer.id.expiration.ms``, the topic
defaults): Kafka's layers, each over the one below it —

    1. the topic's own overrides (kept with the topic, :mod:`oncelog.metadata.topics`),
    2. the dynamic config of this broker     } ``broker-configs.json``: ``{"broker": {..},
    3. the dynamic cluster default           }   "default": {..}}`` (AlterConfigs on BROKER
                                                   resource ``<node id>`` and ``""``)
    4. the static config (``serve`` options, :meth:`BrokerConfig.static_layer`),
    5. Kafka's default.

Kafka 4.1+ clusters run with eligible leader replicas (KIP-966 ELR) on, and then: the controller
writes a cluster-level min.insync.replicas (the static value) when none exists, the cluster-level
one cannot be removed, and a broker-level one cannot be set. Clients see it: DescribeConfigs of
any topic reports min.insync.replicas as DYNAMIC_DEFAULT_BROKER_CONFIG (not default), as Kafka
4.4 does; confluent-kafka-python's test_incremental_alter_configs expects exactly that.

:class:`GroupConfigs` is Kafka 4.x's GROUP config resource (KIP-848's per-group settings):
``group-configs.json`` ``{group_id: {config name: value}}``, Kafka names and the string values as
the alter request gave them, validated first (:func:`oncelog.config.group_configs.validate`).
Kafka keeps these as controller config records, independent of the group itself: configs may be
set before a group exists and outlive it.

Every change is validated whole (Kafka's messages and error codes), then written (the store's
atomic, durable write) before it is in force in memory and before it is answered: a write that
fails (a full disk) raises :class:`~oncelog.errors.KafkaStorageError` and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from .. import errors
from ..config import group_configs as gcfg
from ..config import registry
from ..config.settings import GroupConfig, LogConfig
from .store import BROKER_CONFIGS, GROUP_CONFIGS, MetadataStore

log = logging.getLogger("oncelog.metadata")

ELR_MIN_ISR = "min.insync.replicas"


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


class LiveConfigs:
    """The broker's config layers in force (see the module docstring). ``on_change`` is called
    after every change of the dynamic layers (the topic registry re-resolves its topics' configs)."""

    def __init__(self, store: MetadataStore, default_config: LogConfig, *,
                 static: Mapping[str, str] | None = None) -> None:
        self.store = store
        self.layers = registry.BrokerLayers(static={**static_layer(default_config), **(static or {})})
        self.topic_defaults: dict[str, object] = {}
        self.on_change: list[Callable[[], None]] = []
        self._settle()

    # ------------------------------------------------------------------ reading

    def value(self, name: str) -> object:
        """A broker config's value in force: dynamic, else static, else Kafka's default."""
        return self.layers.value(name)

    def _settle(self) -> None:
        """What is read from the layers on every use, computed once per change."""
        self.topic_defaults = self.layers.topic_defaults()
        self.producer_id_expiration_ms = int(self.layers.value("producer.id.expiration.ms"))
        self.compaction_interval_ms = int(self.layers.value("log.cleaner.backoff.ms"))
        self.default_partitions = int(self.layers.value("num.partitions"))
        self.producer_id_expiration_check_interval_ms = int(
            self.layers.value("producer.id.expiration.check.interval.ms"))

    def topic_config(self, name: str, overrides: Mapping[str, str]) -> LogConfig:
        """A topic's LogConfig: its overrides over the broker's layers. A stored override that is
        no longer valid (an older oncelog accepted it) is logged and not applied."""
        values, problems = registry.resolve_topic_values(dict(overrides), self.topic_defaults)
        for problem in problems:
            log.error("topic %s: a stored config is no longer valid and is not applied: %s", name, problem)
        return LogConfig.from_values(values)

    def validate_topic_configs(self, configs: Mapping[str, str | None], *, strict: bool = True) -> LogConfig:
        """A topic's configs as CreateTopics/AlterConfigs give them, validated as Kafka does
        (INVALID_CONFIG with its message)."""
        try:
            return LogConfig.from_values(registry.validate_topic_configs(dict(configs), self.topic_defaults,
                                                                         strict=strict))
        except registry.ConfigError as exc:
            raise errors.InvalidConfig(str(exc)) from None

    # ------------------------------------------------------------------ loading

    def load(self) -> None:
        """Read ``broker-configs.json`` and apply Kafka's ELR activation (a cluster-level
        min.insync.replicas with the static value, or the default, if there is none, written
        once; a later change of the static value does not change it, as in Kafka)."""
        doc = self.store.read(BROKER_CONFIGS, {})
        self.layers.dynamic_default = dict(doc.get("default", {}))
        self.layers.dynamic_broker = dict(doc.get("broker", {}))
        if ELR_MIN_ISR not in self.layers.dynamic_default:
            value = self.layers.static.get(ELR_MIN_ISR) or self.layers.default_values()[ELR_MIN_ISR]
            self.layers.dynamic_default[ELR_MIN_ISR] = value
            try:
                self._write()
            except OSError as exc:  # a full disk must not stop the start: in force now, written next time
                log.error("could not record the cluster-level min.insync.replicas=%s in %s: %s",
                          value, BROKER_CONFIGS, exc)
        self._settle()

    def reload(self) -> None:
        """A follower's reload of ``broker-configs.json`` (no ELR write: the writer does that)."""
        doc = self.store.read(BROKER_CONFIGS, {})
        self.layers.dynamic_default = dict(doc.get("default", {}))
        self.layers.dynamic_broker = dict(doc.get("broker", {}))
        self._changed()

    def _write(self) -> None:
        self.store.write(BROKER_CONFIGS, {"default": self.layers.dynamic_default,
                                          "broker": self.layers.dynamic_broker})

    def _changed(self) -> None:
        self._settle()
        for callback in self.on_change:
            callback()

    # ------------------------------------------------------------------ changing

    def set_broker_configs(self, per_broker: bool, configs: dict[str, str | None], *, validate_only: bool,
                           named=None, node_id: int | None = None) -> None:
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
            registry.check_topic_values(layers.topic_defaults())
        except (registry.RequestError, registry.ConfigError) as exc:
            raise errors.InvalidRequest(str(exc)) from None
        if validate_only:
            return
        before = self.layers
        self.layers = layers
        try:
            self._write()
        except OSError as exc:
            self.layers = before
            raise errors.KafkaStorageError(f"could not write {BROKER_CONFIGS}: {exc.strerror or exc}") from None
        self._changed()
        log.info("dynamic broker configs (%s) now %s", f"broker {node_id}" if per_broker else "cluster default",
                 dict(configs) or "{}")


class GroupConfigs:
    """Each group's own configs (see the module docstring), read by the group coordinator at
    every use through :meth:`consumer_settings`."""

    def __init__(self, store: MetadataStore, settings: GroupConfig) -> None:
        self.store = store
        self.settings = settings  # the broker's group.consumer.* (bounds and defaults)
        self._configs: dict[str, dict[str, str]] = {}
        # The honoured settings by group, parsed and clamped once per change, not per heartbeat.
        self._effective: dict[str, dict[str, int]] = {}
        self.load()

    def load(self) -> None:
        self._configs = {g: dict(props) for g, props in self.store.read(GROUP_CONFIGS, {}).items()}
        self._effective = {g: gcfg.consumer_settings(props, self.settings) for g, props in self._configs.items()}
        self._share = {}  # group id -> its share settings, computed on first use after a change

    def get(self, group_id: str) -> dict[str, str]:
        """The group's own configs (empty if none)."""
        return dict(self._configs.get(group_id, {}))

    def group_ids(self) -> list[str]:
        """The groups that have configs of their own (ListConfigResources' GROUP resources)."""
        return sorted(g for g, props in self._configs.items() if props)

    def consumer_settings(self, group_id: str) -> Mapping[str, int]:
        """The coordinator's hook: the group's own consumer.* settings in force."""
        return self._effective.get(group_id, {})

    def share_settings(self, group_id: str) -> Mapping[str, object]:
        """A share group's settings in force (its own, else the broker's defaults): every
        ``share.*`` setting the share coordinator and share partitions run by. Parsed once per
        change (every share fetch, acknowledgement and lock expiry reads them); a group without
        configs of its own shares the defaults' entry."""
        key = group_id if group_id in self._configs else None
        found = self._share.get(key)
        if found is None:
            found = self._share[key] = gcfg.share_settings(self._configs.get(group_id, {}), self.settings)
        return found

    def replace(self, group_id: str, props: Mapping[str, str | None], *, validate_only: bool) -> None:
        """Make ``props`` the group's whole set of configs: validated as Kafka's GroupConfig.validate
        (INVALID_CONFIG with its message), then, unless ``validate_only``, written and in force.
        A group with no configs left has no entry."""
        props = {k: v for k, v in props.items() if v is not None}
        try:
            gcfg.validate(props, self.settings)
        except gcfg.ConfigError as exc:
            raise errors.InvalidConfig(str(exc)) from None
        if validate_only:
            return
        configs = dict(self._configs)
        if props:
            configs[group_id] = props
        else:
            configs.pop(group_id, None)
        try:
            self.store.write(GROUP_CONFIGS, configs)
        except OSError as exc:
            raise errors.KafkaStorageError(f"could not write {GROUP_CONFIGS}: {exc}") from None
        self._configs = configs
        self._effective[group_id] = gcfg.consumer_settings(props, self.settings)
        self._share.pop(group_id, None)
        log.info("group %s configs now %s", group_id, props or "{} (broker defaults)")
