"""The settings components are constructed with: frozen dataclasses whose defaults come from
the registry (:mod:`oncelog.config.registry`), in Kafka's units (milliseconds, bytes).

* :class:`BrokerConfig`: everything ``oncelog serve`` configures (built from a server.properties,
  ``--override`` and the serve options by :mod:`oncelog.config.serve_options`, or directly in
  tests); its nested :class:`LogConfig` (the topic configs' broker defaults), :class:`GroupConfig`
  and :class:`TxnConfig`, and the durability policy :class:`FsyncPolicy`.
* Every :class:`~oncelog.config.registry.BrokerConfigDef` with a ``setting`` names a field here;
  :meth:`BrokerConfig.describe` is generated from those entries, so a value and its Kafka name
  cannot drift apart (``tests/config/test_settings.py`` checks each default against the registry).

Invariant: components take these objects in their constructors and never have settings
assigned afterwards; a dynamic config (AlterConfigs) is read from the broker's config layers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from . import registry

_LONG_MAX = (1 << 63) - 1


def default(name: str):
    """The registry's default of a broker config, parsed, in its ``setting``'s unit."""
    d = registry.BROKER_CONFIGS[name]
    value = registry.parse_value(name, d.default, d.type)
    return value * d.factor if isinstance(value, int) and not isinstance(value, bool) else value


@dataclass(frozen=True)
class FsyncPolicy:
    """oncelog.fsync: when appended data is fsynced before it counts as written (high watermark)."""

    mode: str  # "always" | "interval" | "never"
    interval_ms: int = 0

    @classmethod
    def parse(cls, text: str) -> "FsyncPolicy":
        if text in ("always", "never"):
            return cls(text)
        if text.startswith("interval:"):
            try:
                ms = int(text.split(":", 1)[1])
            except ValueError:
                ms = -1
            if ms > 0:
                return cls("interval", ms)
        raise ValueError(f"--fsync must be always, never or interval:MS (MS > 0), not {text!r}")

    def __str__(self) -> str:
        return f"interval:{self.interval_ms}" if self.mode == "interval" else self.mode



@dataclass(frozen=True, slots=True)
class LogConfig:
    """A topic's settings: one attribute per Kafka topic config (``retention.ms`` ->
    ``retention_ms``; LIST configs as their comma-joined string). Names, types, validation and
    what each does are in :mod:`.registry`; the defaults here are Kafka 4.x's (a test
    checks they match the registry)."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 << 20
    flush_messages: int = _LONG_MAX
    flush_ms: int = _LONG_MAX
    retention_bytes: int = -1
    retention_ms: int = 7 * 24 * 3600 * 1000
    max_message_bytes: int = 1048588
    index_interval_bytes: int = 4096
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = _LONG_MAX
    file_delete_delay_ms: int = 60_000
    min_cleanable_dirty_ratio: float = 0.5
    cleanup_policy: str = "delete"
    unclean_leader_election_enable: bool = False
    min_insync_replicas: int = 1
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    preallocate: bool = False
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = _LONG_MAX
    message_timestamp_after_max_ms: int = 3600 * 1000
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    remote_copy_lag_bytes: int = -1
    remote_copy_lag_ms: int = 0
    max_decompressed_message_bytes: int = 2147483639
    errors_deadletterqueue_group_enable: bool = False
    internal_segment_bytes: int | None = None

    # -- derived settings

    @property
    def segment_size(self) -> int:
        """Kafka's LogConfig.segmentSize(): internal.segment.bytes when set."""
        return self.internal_segment_bytes if self.internal_segment_bytes is not None else self.segment_bytes

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def max_segment_ms(self) -> int:
        """Kafka's maxSegmentMs(): compacted topics roll by max.compaction.lag.ms too."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    # -- conversions

    def values(self) -> dict[str, object]:
        """Topic config name -> value (LIST configs as lists), for :mod:`oncelog.config.registry`."""
        out = {}
        for name, c in registry.TOPIC_CONFIGS.items():
            v = getattr(self, c.attr)
            out[name] = registry.parse_value(name, v, c.type) if c.type == registry.ConfigType.LIST else v
        return out

    @classmethod
    def from_values(cls, values: dict[str, object]) -> "LogConfig":
        kwargs = {}
        for name, c in registry.TOPIC_CONFIGS.items():
            v = values[name]
            kwargs[c.attr] = registry.to_wire(v, c.type) if c.type == registry.ConfigType.LIST else v
        return cls(**kwargs)

    def describe(self) -> dict[str, str]:
        """Kafka name -> value as DescribeConfigs reports it (internal configs left out)."""
        return {name: registry.to_wire(getattr(self, c.attr), c.type)
                for name, c in registry.TOPIC_CONFIGS.items() if not c.internal}

    def with_overrides(self, overrides: dict[str, str | None], *, strict: bool = True) -> "LogConfig":
        """These settings (the broker's defaults for a topic) under a topic's Kafka-named
        overrides, validated as Kafka does; raises :class:`oncelog.config.registry.ConfigError` (a
        ValueError) with Kafka's message. ``strict=False``: see
        :func:`oncelog.config.registry.validate_topic_configs`."""
        return LogConfig.from_values(registry.validate_topic_configs(overrides, self.values(), strict=strict))

    def validate(self) -> None:
        """Check these values as broker defaults (``oncelog serve`` options): Kafka's validators,
        except segment.bytes' 1 MiB minimum (14 bytes, as before Kafka 4.0)."""
        values = self.values()
        for name, c in registry.TOPIC_CONFIGS.items():
            v = values[name]
            if c.validator is None or v is None:
                continue
            if name == "segment.bytes":
                registry.at_least(14)(name, v)
            else:
                c.validator(name, v)
        registry.check_topic_values(values)



@dataclass(frozen=True)
class GroupConfig:
    """The group coordinator's settings (group.*, offsets.retention.minutes)."""

    min_session_timeout_ms: int = default("group.min.session.timeout.ms")
    max_session_timeout_ms: int = default("group.max.session.timeout.ms")
    offsets_retention_ms: int = default("offsets.retention.minutes")
    max_size: int = default("group.max.size")
    # group.initial.rebalance.delay.ms: a BrokerConfig's (and so `oncelog serve`'s) default is
    # Kafka's 3000; the bare coordinator's (sans-IO tests) is none, so a join completes at once.
    initial_rebalance_delay_ms: int = 0
    consumer_session_timeout_ms: int = default("group.consumer.session.timeout.ms")
    consumer_heartbeat_interval_ms: int = default("group.consumer.heartbeat.interval.ms")
    consumer_max_size: int = default("group.consumer.max.size")
    consumer_min_session_timeout_ms: int = default("group.consumer.min.session.timeout.ms")
    consumer_max_session_timeout_ms: int = default("group.consumer.max.session.timeout.ms")
    consumer_min_heartbeat_interval_ms: int = default("group.consumer.min.heartbeat.interval.ms")
    consumer_max_heartbeat_interval_ms: int = default("group.consumer.max.heartbeat.interval.ms")
    consumer_assignment_interval_ms: int = default("group.consumer.assignment.interval.ms")
    consumer_min_assignment_interval_ms: int = default("group.consumer.min.assignment.interval.ms")
    consumer_max_assignment_interval_ms: int = default("group.consumer.max.assignment.interval.ms")
    consumer_assignors: list[str] = field(default_factory=lambda: list(default("group.consumer.assignors")))
    consumer_migration_policy: str = default("group.consumer.migration.policy")
    share_max_size: int = default("group.share.max.size")
    share_max_share_sessions: int = default("group.share.max.share.sessions")
    share_session_timeout_ms: int = default("group.share.session.timeout.ms")
    share_min_session_timeout_ms: int = default("group.share.min.session.timeout.ms")
    share_max_session_timeout_ms: int = default("group.share.max.session.timeout.ms")
    share_heartbeat_interval_ms: int = default("group.share.heartbeat.interval.ms")
    share_min_heartbeat_interval_ms: int = default("group.share.min.heartbeat.interval.ms")
    share_max_heartbeat_interval_ms: int = default("group.share.max.heartbeat.interval.ms")
    share_record_lock_duration_ms: int = default("group.share.record.lock.duration.ms")
    share_min_record_lock_duration_ms: int = default("group.share.min.record.lock.duration.ms")
    share_max_record_lock_duration_ms: int = default("group.share.max.record.lock.duration.ms")
    share_delivery_count_limit: int = default("group.share.delivery.count.limit")
    share_min_delivery_count_limit: int = default("group.share.min.delivery.count.limit")
    share_max_delivery_count_limit: int = default("group.share.max.delivery.count.limit")
    share_partition_max_record_locks: int = default("group.share.partition.max.record.locks")
    share_min_partition_max_record_locks: int = default("group.share.min.partition.max.record.locks")
    share_max_partition_max_record_locks: int = default("group.share.max.partition.max.record.locks")

    def consumer_bounds_error(self) -> tuple[str, int, str, int] | None:
        """The first group.consumer.* setting outside its min/max bounds, as (name, value,
        bound's name, bound), or None (Kafka's GroupCoordinatorConfig refuses to start so)."""
        for name, value, lo_name, lo, hi_name, hi in (
                ("group.consumer.session.timeout.ms", self.consumer_session_timeout_ms,
                 "group.consumer.min.session.timeout.ms", self.consumer_min_session_timeout_ms,
                 "group.consumer.max.session.timeout.ms", self.consumer_max_session_timeout_ms),
                ("group.consumer.heartbeat.interval.ms", self.consumer_heartbeat_interval_ms,
                 "group.consumer.min.heartbeat.interval.ms", self.consumer_min_heartbeat_interval_ms,
                 "group.consumer.max.heartbeat.interval.ms", self.consumer_max_heartbeat_interval_ms),
                ("group.consumer.assignment.interval.ms", self.consumer_assignment_interval_ms,
                 "group.consumer.min.assignment.interval.ms", self.consumer_min_assignment_interval_ms,
                 "group.consumer.max.assignment.interval.ms", self.consumer_max_assignment_interval_ms)):
            if value < lo:
                return name, value, lo_name, lo
            if value > hi:
                return name, value, hi_name, hi
        return None

    def share_settings_error(self) -> str | None:
        """The first cross-check of the group.share.* settings that fails, as Kafka's message
        with the values, or None: Kafka's GroupCoordinatorConfig (heartbeat and session within
        their min/max, heartbeat below session) then ShareGroupConfig.validate (delivery limit,
        record locks and lock duration within their min/max, sessions >= members); Kafka's
        broker does not start then."""
        def value(n: str) -> int:  # group.share.max.size -> share_max_size
            return getattr(self, n[len("group."):].replace(".", "_"))

        checks = []
        for what in ("heartbeat.interval.ms", "session.timeout.ms"):
            lo, mid, hi = (f"group.share.min.{what}", f"group.share.{what}", f"group.share.max.{what}")
            checks += [(hi, ">=", lo), (mid, ">=", lo), (mid, "<=", hi)]
        checks.append(("group.share.heartbeat.interval.ms", "<", "group.share.session.timeout.ms"))
        checks += [("group.share.max.delivery.count.limit", ">=", "group.share.delivery.count.limit"),
                   ("group.share.delivery.count.limit", ">=", "group.share.min.delivery.count.limit"),
                   ("group.share.max.partition.max.record.locks", ">=", "group.share.partition.max.record.locks"),
                   ("group.share.partition.max.record.locks", ">=", "group.share.min.partition.max.record.locks"),
                   ("group.share.record.lock.duration.ms", ">=", "group.share.min.record.lock.duration.ms"),
                   ("group.share.max.record.lock.duration.ms", ">=", "group.share.record.lock.duration.ms"),
                   ("group.share.max.share.sessions", ">=", "group.share.max.size")]
        words = {">=": "greater than or equal to", "<=": "less than or equal to", "<": "less than"}
        for left, op, right in checks:
            a, b = value(left), value(right)
            if not (a >= b if op == ">=" else a <= b if op == "<=" else a < b):
                return f"{left} must be {words[op]} {right} ({left}={a}, {right}={b})"
        return None

    def __post_init__(self) -> None:
        # Kafka's class names for the assignors are their short names here, in order, once each.
        names = [a.rsplit(".", 1)[-1].removesuffix("Assignor").lower() for a in self.consumer_assignors]
        object.__setattr__(self, "consumer_assignors", list(dict.fromkeys(names)))



@dataclass(frozen=True)
class TxnConfig:
    """The transaction coordinator's settings."""

    max_timeout_ms: int = default("transaction.max.timeout.ms")
    transactional_id_expiration_ms: int = default("transactional.id.expiration.ms")
    remove_expired_interval_ms: int = default("transaction.remove.expired.transaction.cleanup.interval.ms")




@dataclass(frozen=True)
class SslConfig:
    """A TLS listener's ``ssl.*`` settings (PEM only), after per-listener overrides."""

    keystore_location: str | None = None
    keystore_certificate_chain: str | None = None
    keystore_key: str | None = None
    key_password: str | None = None
    truststore_location: str | None = None
    truststore_certificates: str | None = None
    client_auth: str = "none"  # none | requested | required
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")


@dataclass(frozen=True)
class ListenerConfig:
    """One entry of ``listeners``: its name, security protocol (from
    ``listener.security.protocol.map``), where it binds, what Metadata hands out to a client that
    came through it (``advertised.listeners``, else the bound address), and TLS if it has any."""

    name: str
    security_protocol: str  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    host: str
    port: int
    advertised: tuple[str, int] | None = None
    ssl: SslConfig | None = None
    # SASL listeners: the mechanisms offered, and each mechanism's JAAS text (upper-case name).
    sasl_mechanisms: tuple[str, ...] = ()
    jaas: tuple[tuple[str, str], ...] = ()
    # OAUTHBEARER's sasl.oauthbearer.* settings in force (listener.name.<l>.oauthbearer.<name> over
    # <name>), by Kafka name, as given; with sasl.oauthbearer.jwks.endpoint.url: signed tokens only.
    oauthbearer: tuple[tuple[str, str], ...] = ()

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")


@dataclass(frozen=True)
class BrokerConfig:
    """What one broker runs with. Field names are the Kafka names' (``log.cleaner.backoff.ms`` ->
    ``log_cleaner_backoff_ms``), in Kafka's units; the registry entry of each says what it does.

    ``given``: the broker configs set explicitly at start, by Kafka name (a server.properties,
    ``--override``, serve options): DescribeConfigs reports them as STATIC_BROKER_CONFIG, the
    others as DEFAULT_CONFIG (unless a field was set to other than its default in code)."""

    data_dir: str  # log.dirs
    host: str = "127.0.0.1"  # listeners
    port: int = 9092
    advertise: str | None = None  # advertised.listeners as HOST:PORT
    fsync: FsyncPolicy = field(default_factory=lambda: FsyncPolicy.parse(default("oncelog.fsync")))
    auto_create_topics: bool = default("auto.create.topics.enable")
    num_partitions: int = default("num.partitions")
    socket_request_max_bytes: int = default("socket.request.max.bytes")
    queued_max_request_bytes: int = default("queued.max.request.bytes")  # <= 0: unbounded
    max_connections: int = default("max.connections")
    max_connections_per_ip: int = default("max.connections.per.ip")
    connections_max_idle_ms: int = default("connections.max.idle.ms")  # < 0: never
    request_read_timeout_ms: int = default("oncelog.request.read.timeout.ms")  # <= 0: never
    log: LogConfig = field(default_factory=LogConfig)  # the log.* broker synonyms of topic configs
    log_flush_offset_checkpoint_interval_ms: int = default("log.flush.offset.checkpoint.interval.ms")
    log_retention_check_interval_ms: int = default("log.retention.check.interval.ms")
    producer_id_expiration_ms: int = default("producer.id.expiration.ms")
    offsets_topic_partitions: int = default("offsets.topic.num.partitions")
    offsets_topic_segment_bytes: int = default("offsets.topic.segment.bytes")
    transaction_topic_partitions: int = default("transaction.state.log.num.partitions")
    transaction_topic_segment_bytes: int = default("transaction.state.log.segment.bytes")
    log_cleaner_backoff_ms: int = default("log.cleaner.backoff.ms")
    txn: TxnConfig = field(default_factory=TxnConfig)
    group: GroupConfig = field(default_factory=lambda: GroupConfig(
        initial_rebalance_delay_ms=default("group.initial.rebalance.delay.ms")))
    node_id: int = default("node.id")
    # A cluster of node processes on this machine (oncelog.cluster): how many; node_id is then
    # this process's node (1 is the controller). Not a Kafka config: ``serve --nodes``.
    nodes: int = 1
    connections_max_reauth_ms: int = default("connections.max.reauth.ms")
    sasl_server_max_receive_size: int = default("sasl.server.max.receive.size")
    allow_unauthenticated_listeners: bool = default("oncelog.allow.unauthenticated.listeners")
    metrics_listener: str = default("oncelog.metrics.listener")  # HOST:PORT of /metrics; "" off
    authorizer_class_name: str = default("authorizer.class.name")
    super_users: str = default("super.users")
    allow_everyone_if_no_acl_found: bool = default("allow.everyone.if.no.acl.found")
    # Every listener when given as Kafka's ``listeners``; empty: one PLAINTEXT listener on
    # host:port advertised as ``advertise`` (what the serve options and in-process tests give).
    listeners: tuple[ListenerConfig, ...] = ()
    given: Mapping[str, str] = field(default_factory=dict)

    def all_listeners(self) -> tuple[ListenerConfig, ...]:
        if self.listeners:
            return self.listeners
        advertised = None
        if self.advertise:
            h, _, p = self.advertise.rpartition(":")
            advertised = (h, int(p))
        return (ListenerConfig("PLAINTEXT", "PLAINTEXT", self.host, self.port, advertised),)

    def setting(self, name: str):
        """The value of the field a broker config sets, in the config's own unit."""
        d = registry.BROKER_CONFIGS[name]
        value = self
        for part in d.setting.split("."):
            value = getattr(value, part)
        if isinstance(value, FsyncPolicy):
            return str(value)
        return value // d.factor if d.factor != 1 else value

    def describe(self) -> dict[str, str]:
        """Kafka name -> value (wire text) of every broker config this object holds, and of
        the topic configs' broker synonyms its LogConfig sets (under the first synonym)."""
        out = {}
        for name, d in registry.BROKER_CONFIGS.items():
            if d.setting is not None:
                out[name] = registry.to_wire(self.setting(name), d.type)
            elif d.handling is registry.Handling.NO_EFFECT:
                # Replication factors: one broker; any other: its default (it changes nothing).
                out[name] = "1" if d.type in (registry.ConfigType.SHORT, registry.ConfigType.INT) else d.default
        for name, c in registry.TOPIC_CONFIGS.items():
            primary = registry.PRIMARY_SYNONYM.get(name)
            if primary is not None and not c.internal:
                out[primary] = registry.to_wire(getattr(self.log, c.attr), c.type)
        return out

    def static_layer(self) -> dict[str, str]:
        """The broker configs' static layer (DescribeConfigs' STATIC_BROKER_CONFIG): the names
        given at start as given, and any other whose value is not the registry's default (a
        BrokerConfig built in code). Topic-config synonyms only when given or not Kafka's
        topic default (a LogConfig built in code)."""
        out = {}
        topic_default = LogConfig()
        for name, value in self.describe().items():
            if name in registry.TOPIC_SYNONYM_NAMES:
                topic = registry.TOPIC_CONFIGS[registry.synonym_target(name)]
                if getattr(self.log, topic.attr) == getattr(topic_default, topic.attr):
                    continue
            elif value == registry.BROKER_CONFIGS[name].default:
                continue
            out[name] = value
        for name, value in self.given.items():
            if name in registry.TOPIC_SYNONYM_NAMES:
                # A given synonym (log.retention.hours) stands for itself; the primary one derived
                # above (log.retention.ms) would hide it.
                for s in registry.broker_synonyms(name):
                    if s not in self.given:
                        out.pop(s, None)
            out[name] = value
        return out


metrics_address = registry.metrics_address  # the setting's one parse, beside its validator
