"""Kafka's topic and broker configs: names, types, defaults, validation, synonyms — pure, no I/O.

What this module knows (checked against Apache Kafka 4.x: ``LogConfig``, ``TopicConfig``,
``ServerLogConfigs``, ``ServerTopicConfigSynonyms``, ``ConfigDef`` and its validators,
``ConfigHelper``, ``ConfigAdminManager``, ``DynamicBrokerConfig``, ``ConfigurationControlManager``):

* :data:`TOPIC_CONFIGS`: every topic config Kafka 4.x defines, in Kafka's definition order (the
  order in which its ``ConfigDef.parse`` reports the first bad value), each with its wire type
  (:class:`ConfigType`), default, Kafka's validator, its broker synonyms in Kafka's order, and
  what oncelog does with it (:class:`Handling`):

  ``HONOURED``  the broker does what Kafka does with the value (how: :attr:`TopicConfigDef.doc`);
  ``NO_EFFECT`` accepted because it is meaningless on one broker without replication or tiered
                storage, exactly as Kafka itself ignores it in that situation (the doc says why);
  ``REFUSED``   values oncelog cannot honour are refused with INVALID_CONFIG and a message saying
                why (only the harmless value, e.g. ``preallocate=false``, is accepted).

  Nothing is accepted and silently ignored.

* :data:`BROKER_CONFIGS`: the broker configs oncelog has (the topic configs' broker synonyms plus
  the broker's own settings), with Kafka's type and default, oncelog's default where it differs,
  and whether Kafka lets AlterConfigs change it at run time.

* Validation with Kafka's messages (:func:`validate_topic_configs`, :func:`validate_broker_configs`),
  value resolution through the broker's config layers (:class:`BrokerLayers`: per-broker dynamic,
  cluster-default dynamic, static, default — with Kafka's synonym precedence), the
  DescribeConfigs view of a topic or the broker (:func:`describe_topic`, :func:`describe_broker`),
  and IncrementalAlterConfigs' operations (:func:`apply_incremental`).

Errors: :class:`ConfigError` is what Kafka answers as INVALID_CONFIG (40); :class:`RequestError`
what it answers as INVALID_REQUEST (42).
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1


class ConfigType(enum.IntEnum):
    """DescribeConfigs' config_type (KIP-569), Kafka's ``DescribeConfigsResponse.ConfigType``."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """DescribeConfigs' config_source (KIP-226), Kafka's ``DescribeConfigsResponse.ConfigSource``."""

    UNKNOWN = 0
    TOPIC = 1                    # DYNAMIC_TOPIC_CONFIG
    DYNAMIC_BROKER = 2           # DYNAMIC_BROKER_CONFIG: set with AlterConfigs for this broker id
    DYNAMIC_DEFAULT_BROKER = 3   # DYNAMIC_DEFAULT_BROKER_CONFIG: set for the cluster (resource name "")
    STATIC_BROKER = 4            # STATIC_BROKER_CONFIG: given at start (``oncelog serve`` options)
    DEFAULT = 5                  # DEFAULT_CONFIG: the built-in default


class Handling(enum.Enum):
    HONOURED = "honoured"
    NO_EFFECT = "accepted, no effect on one broker"
    REFUSED = "refused unless harmless"


class ConfigError(ValueError):
    """A config value Kafka refuses with INVALID_CONFIG; the message is Kafka's wording."""


class RequestError(ValueError):
    """What Kafka refuses with INVALID_REQUEST (malformed alter requests; any broker-config
    validation failure, see ``ConfigAdminManager.validateBrokerConfigChange``)."""


# ------------------------------------------------------------------------------------------
# Kafka's ConfigDef.parseType and convertToString, for string values from the wire.

_INT_RE = re.compile(r"[+-]?[0-9]+")
_DOUBLE_RE = re.compile(r"[+-]?(NaN|Infinity|(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?)")
_COMMA = re.compile(r"\s*,\s*")
_BOUNDS = {ConfigType.INT: 32, ConfigType.SHORT: 16, ConfigType.LONG: 64}


def _trim(text: str) -> str:
    """Java's String.trim: strips every char <= ' '."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def _invalid(name: str, value, message: str | None = None) -> ConfigError:
    """Kafka's ConfigException(name, value, message) text."""
    return ConfigError(f"Invalid value {java_str(value)} for configuration {name}" + (f": {message}" if message else ""))


def java_str(value) -> str:
    """How Java prints a parsed value in a message (Boolean, Long, Double, List)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(java_str(v) for v in value) + "]"
    return str(value)


def java_double(x: float) -> str:
    """Java's Double.toString: plain between 1e-3 and 1e7, else d.dddE[-]n."""
    from decimal import Decimal

    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        text = repr(float(x))
        return text if "e" not in text else format(x, "f")
    sign, raw, exp = Decimal(repr(float(x))).as_tuple()
    exponent = exp + len(raw) - 1
    digits = "".join(map(str, raw)).rstrip("0") or "0"
    return ("-" if sign else "") + digits[0] + "." + (digits[1:] or "0") + f"E{exponent}"


def parse_value(name: str, raw, ctype: ConfigType):
    """Kafka's ConfigDef.parseType for a string from the wire: the typed value, or ConfigError
    with Kafka's message."""
    if raw is None:
        return None
    text = _trim(raw)
    if ctype == ConfigType.BOOLEAN:
        low = text.lower()
        if low in ("true", "false"):
            return low == "true"
        raise _invalid(name, raw, "Expected value to be either true or false")
    if ctype in (ConfigType.STRING, ConfigType.PASSWORD, ConfigType.CLASS):
        return text
    if ctype in _BOUNDS:
        bits = _BOUNDS[ctype]
        if _INT_RE.fullmatch(text):
            n = int(text)
            if -(1 << (bits - 1)) <= n < (1 << (bits - 1)):
                return n
        raise _invalid(name, raw, f"Not a number of type {ctype.name}")
    if ctype == ConfigType.DOUBLE:
        if _DOUBLE_RE.fullmatch(text):
            return float(text.rstrip("fFdD").replace("Infinity", "inf"))
        raise _invalid(name, raw, "Not a number of type DOUBLE")
    if ctype == ConfigType.LIST:
        return [] if not text else _COMMA.split(text)
    raise ValueError(f"unknown config type {ctype}")


def to_wire(value, ctype: ConfigType) -> str | None:
    """Kafka's ConfigDef.convertToString: the value as DescribeConfigs reports it."""
    if value is None:
        return None
    if ctype == ConfigType.BOOLEAN:
        return "true" if value else "false"
    if ctype == ConfigType.DOUBLE:
        return java_double(float(value))
    if ctype == ConfigType.LIST:
        return value if isinstance(value, str) else ",".join(str(v) for v in value)
    return str(value)


# ------------------------------------------------------------------------------------------
# Kafka's validators (ConfigDef.Range, ValidString, ValidList, ThrottledReplicaListValidator,
# CompressionType level validators), with their messages.

# Kafka's OAUTHBEARER server callback handlers (3.x's secured.* name and 4.x's).
OAUTHBEARER_VALIDATOR_CLASSES = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler")
OAUTHBEARER_UNSECURED_VALIDATOR_CLASS = \
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"

Validator = Callable[[str, object], None]


def at_least(minimum) -> Validator:
    def check(name, value):
        if value < minimum:
            raise _invalid(name, value, f"Value must be at least {java_str(minimum)}")
    check.describe = f"[{java_str(minimum)},...]"
    return check


def between(lo, hi) -> Validator:
    def check(name, value):
        if value < lo:
            raise _invalid(name, value, f"Value must be at least {java_str(lo)}")
        if value > hi:
            raise _invalid(name, value, f"Value must be no more than {java_str(hi)}")
    check.describe = f"[{java_str(lo)},...,{java_str(hi)}]"
    return check


def one_of(*valid: str) -> Validator:
    def check(name, value):
        if value not in valid:
            raise _invalid(name, value, "String must be one of: " + ", ".join(valid))
    check.describe = "[" + ", ".join(valid) + "]"
    return check


def metrics_address(text: str) -> tuple[str, int] | None:
    """oncelog.metrics.listener's ``HOST:PORT`` (``[::1]:9308`` for IPv6; an empty host is
    127.0.0.1) -> (host, port); "" -> None (no metrics endpoint)."""
    text = (text or "").strip()
    if not text:
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


def _metrics_listener(name, value):
    try:
        metrics_address(value)
    except ValueError:
        raise _invalid(name, value, "Value must be HOST:PORT (empty: no metrics endpoint)") from None


_metrics_listener.describe = "HOST:PORT or empty"


def list_of(*valid: str) -> Validator:
    item = one_of(*valid)

    def check(name, value):
        for v in value:
            item(name, v)
    check.describe = item.describe
    return check


def _throttled_replicas(name, value):
    if not (all(re.fullmatch(r"([0-9]+:[0-9]+)?", v.strip()) for v in value) or "".join(value) == "*"):
        raise _invalid(name, value, f"{name} must be the literal '*' or a list of replicas in the following "
                                    "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


_throttled_replicas.describe = "[partitionId]:[brokerId],[partitionId]:[brokerId],..."


def _gzip_level(name, value):
    if value > 9 or (value < 1 and value != -1):
        raise _invalid(name, value, "Value must be between 1 and 9 or equal to -1")


_gzip_level.describe = "[1,...,9] or -1"


# ------------------------------------------------------------------------------------------
# Topic configs.

HOURS = 3_600_000
MINUTES = 60_000


@dataclass(frozen=True)
class Synonym:
    """A broker config that sets a topic config's default; ``factor`` converts its unit to the
    topic config's (log.retention.hours -> retention.ms: 3600000)."""

    name: str
    factor: int = 1


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    default: object
    validator: Validator | None
    synonyms: tuple[Synonym, ...]
    handling: Handling
    doc: str
    # For REFUSED configs: the reason a value cannot be honoured, or None if it can.
    refuse: Callable[[object], str | None] | None = None
    internal: bool = False  # Kafka's defineInternal: accepted, never described

    @property
    def attr(self) -> str:
        """The attribute of :class:`~oncelog.storage.partition_log.LogConfig` holding it."""
        return self.name.replace(".", "_")


def _syn(*names: str | tuple[str, int]) -> tuple[Synonym, ...]:
    return tuple(Synonym(n) if isinstance(n, str) else Synonym(*n) for n in names)


def _topic(name, ctype, default, validator, synonyms, handling, doc, refuse=None, internal=False):
    return TopicConfigDef(name, ctype, default, validator, synonyms, handling, doc, refuse, internal)


_H, _N, _R = Handling.HONOURED, Handling.NO_EFFECT, Handling.REFUSED
T = ConfigType

# Kafka 4.x LogConfig's definition order. Topic configs removed in 4.0 (message.format.version,
# message.timestamp.difference.max.ms) are unknown names, as in Kafka 4.x.
_CONSUMER_ASSIGNORS_KAFKA = ("org.apache.kafka.coordinator.group.assignor.UniformAssignor,"
                             "org.apache.kafka.coordinator.group.assignor.RangeAssignor")

_TOPIC_LIST = [
    _topic("segment.bytes", T.INT, 1 << 30, at_least(1 << 20), _syn("log.segment.bytes"), _H,
           "Size at which the active segment rolls. Kafka 4.x's minimum is 1 MiB (oncelog serve "
           "--segment-bytes and internal topics may go lower, as Kafka's internal.segment.bytes)."),
    _topic("segment.ms", T.LONG, 7 * 24 * HOURS, at_least(1), _syn("log.roll.ms", ("log.roll.hours", HOURS)), _H,
           "Age at which the active segment rolls (on the next append), so retention and compaction can "
           "act on it."),
    _topic("segment.jitter.ms", T.LONG, 0, at_least(0),
           _syn("log.roll.jitter.ms", ("log.roll.jitter.hours", HOURS)), _H,
           "A random amount up to this (and below segment.ms) subtracted from segment.ms for each new "
           "segment, so partitions do not all roll at once."),
    _topic("segment.index.bytes", T.INT, 10 << 20, at_least(4), _syn("log.index.size.max.bytes"), _H,
           "Maximum size of a segment's offset index (8-byte entries; the time index has 12-byte "
           "entries): the segment rolls when either index is full."),
    _topic("flush.messages", T.LONG, LONG_MAX, at_least(1), _syn("log.flush.interval.messages"), _H,
           "fsync a partition after this many records. Under serve --fsync always every append is "
           "fsynced before it is acknowledged (acks=all) or readable, which already satisfies it; under "
           "interval/never a flush round starts when a partition reaches this many unflushed records."),
    _topic("flush.ms", T.LONG, LONG_MAX, at_least(0),
           _syn("log.flush.interval.ms", "log.flush.scheduler.interval.ms"), _H,
           "fsync a partition whose oldest unflushed data is this old. Satisfied by serve --fsync "
           "always; under interval/never a background check flushes such partitions."),
    _topic("retention.bytes", T.LONG, -1, None, _syn("log.retention.bytes"), _H,
           "Per partition: closed segments are deleted from the oldest while the log is larger "
           "(cleanup.policy with delete). -1: no size limit."),
    _topic("retention.ms", T.LONG, 7 * 24 * HOURS, at_least(-1),
           _syn("log.retention.ms", ("log.retention.minutes", MINUTES), ("log.retention.hours", HOURS)), _H,
           "Closed segments whose newest record is older than this are deleted (cleanup.policy with "
           "delete). -1: no time limit."),
    _topic("max.message.bytes", T.INT, 1024 * 1024 + 12, at_least(0), _syn("message.max.bytes"), _H,
           "Largest record batch accepted (after recompression when compression.type asks for it); "
           "larger batches get MESSAGE_TOO_LARGE."),
    _topic("index.interval.bytes", T.INT, 4096, at_least(0), _syn("log.index.interval.bytes"), _H,
           "Bytes of log between two offset index entries (new segments use the current value)."),
    _topic("delete.retention.ms", T.LONG, 24 * HOURS, at_least(0), _syn("log.cleaner.delete.retention.ms"), _H,
           "Compacted topics: a tombstone (null value) is kept this long after its timestamp, so "
           "readers see the delete."),
    _topic("min.compaction.lag.ms", T.LONG, 0, at_least(0), _syn("log.cleaner.min.compaction.lag.ms"), _H,
           "Compacted topics: segments holding records younger than this are not compacted, and their "
           "records do not supersede older ones yet."),
    _topic("max.compaction.lag.ms", T.LONG, LONG_MAX, at_least(1), _syn("log.cleaner.max.compaction.lag.ms"), _H,
           "Compacted topics: the active segment rolls at this age (if earlier than segment.ms) and a "
           "partition with dirty data this old is compacted whatever its dirty ratio."),
    _topic("file.delete.delay.ms", T.LONG, 60_000, at_least(0), _syn("log.segment.delete.delay.ms"), _N,
           "Accepted, no effect: Kafka delays deleting a segment file so that reads in flight on other "
           "threads finish; oncelog reads and deletes segments on its one event loop, so no read can "
           "be in flight and files are deleted at once."),
    _topic("min.cleanable.dirty.ratio", T.DOUBLE, 0.5, between(0, 1), _syn("log.cleaner.min.cleanable.ratio"), _H,
           "Compacted topics: compaction runs once the bytes written since the last compaction are at "
           "least this share of the partition's closed segments (everything counts as dirty after a "
           "restart)."),
    _topic("cleanup.policy", T.LIST, "delete", list_of("compact", "delete"), _syn("log.cleanup.policy"), _H,
           "delete: retention.ms/retention.bytes delete old segments. compact: the log cleaner keeps "
           "the latest record per key, and records without a key are refused (INVALID_RECORD). Both "
           "may be given."),
    _topic("unclean.leader.election.enable", T.BOOLEAN, False, None, _syn("unclean.leader.election.enable"), _N,
           "Accepted, no effect: oncelog is one broker holding the only replica of every partition, "
           "which is always the leader; there is never an election."),
    _topic("min.insync.replicas", T.INT, 1, at_least(1), _syn("min.insync.replicas"), _H,
           "acks=all produce requests need this many in-sync replicas, capped at the replication factor "
           "(Kafka's effective min ISR). oncelog has one replica per partition, so acks=all always "
           "succeeds, as Kafka answers for a one-replica topic."),
    _topic("compression.type", T.STRING, "producer",
           one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), _syn("compression.type"), _H,
           "producer: batches are stored as sent. Any other value: batches compressed otherwise are "
           "recompressed to it (uncompressed: decompressed) before they are written."),
    _topic("compression.gzip.level", T.INT, -1, _gzip_level, _syn("compression.gzip.level"), _H,
           "Level used when the broker recompresses to gzip (-1: zlib's default)."),
    _topic("compression.lz4.level", T.INT, 9, between(1, 17), _syn("compression.lz4.level"), _H,
           "Level used when the broker recompresses to lz4."),
    _topic("compression.zstd.level", T.INT, 3, between(-131072, 22), _syn("compression.zstd.level"), _H,
           "Level used when the broker recompresses to zstd."),
    _topic("preallocate", T.BOOLEAN, False, None, _syn("log.preallocate"), _R,
           "Only false: oncelog does not preallocate segment files.",
           refuse=lambda v: ("oncelog does not preallocate segment files: its recovery takes a segment's "
                             "length from the file size") if v else None),
    _topic("message.timestamp.type", T.STRING, "CreateTime", one_of("CreateTime", "LogAppendTime"),
           _syn("log.message.timestamp.type"), _H,
           "CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch with the "
           "broker's clock."),
    _topic("message.timestamp.before.max.ms", T.LONG, LONG_MAX, at_least(0),
           _syn("log.message.timestamp.before.max.ms"), _H,
           "CreateTime: a record whose timestamp is more than this before the broker's clock is "
           "refused (INVALID_TIMESTAMP, with the record's index)."),
    _topic("message.timestamp.after.max.ms", T.LONG, HOURS, at_least(0),
           _syn("log.message.timestamp.after.max.ms"), _H,
           "CreateTime: a record whose timestamp is more than this after the broker's clock is "
           "refused (INVALID_TIMESTAMP). Kafka 4.x's default is one hour."),
    _topic("leader.replication.throttled.replicas", T.LIST, "", _throttled_replicas, (), _N,
           "Accepted, no effect: throttles replication traffic, and oncelog has no followers."),
    _topic("follower.replication.throttled.replicas", T.LIST, "", _throttled_replicas, (), _N,
           "Accepted, no effect: throttles replication traffic, and oncelog has no followers."),
    _topic("remote.storage.enable", T.BOOLEAN, False, None, (), _R,
           "Only false: oncelog has no tiered storage (true gets Kafka's own answer for a broker with "
           "tiered storage disabled)."),
    _topic("local.retention.ms", T.LONG, -2, at_least(-2), _syn("log.local.retention.ms"), _N,
           "Accepted, no effect: bounds the local part of a tiered log; without tiered storage (always "
           "so in oncelog) the whole log is local and retention.ms applies, as in Kafka."),
    _topic("local.retention.bytes", T.LONG, -2, at_least(-2), _syn("log.local.retention.bytes"), _N,
           "Accepted, no effect: bounds the local part of a tiered log; without tiered storage (always "
           "so in oncelog) retention.bytes applies, as in Kafka."),
    _topic("remote.log.copy.disable", T.BOOLEAN, False, None, (), _N,
           "Accepted, no effect: concerns copying to tiered storage, which oncelog does not have "
           "(Kafka accepts it likewise when tiered storage is off)."),
    _topic("remote.log.delete.on.disable", T.BOOLEAN, False, None, (), _N,
           "Accepted, no effect: concerns deleting tiered data, which oncelog does not have (Kafka "
           "accepts it likewise when tiered storage is off)."),
    _topic("remote.copy.lag.bytes", T.LONG, -1, at_least(-1), _syn("log.remote.copy.lag.bytes"), _N,
           "Accepted, no effect: when a segment may be copied to tiered storage, which oncelog does not "
           "have (Kafka 4.4 accepts it likewise when tiered storage is off)."),
    _topic("remote.copy.lag.ms", T.LONG, 0, at_least(-1), _syn("log.remote.copy.lag.ms"), _N,
           "Accepted, no effect: when a segment may be copied to tiered storage, which oncelog does not "
           "have (Kafka 4.4 accepts it likewise when tiered storage is off)."),
    _topic("max.decompressed.message.bytes", T.INT, 2147483639, between(1, 2147483639),
           _syn("max.decompressed.message.bytes"), _N,
           "Accepted, no effect as such: Kafka 4.4 bounds each record's decompressed size by it. oncelog "
           "bounds each batch's decompression at min(64 x max.message.bytes, 256 MiB) (MESSAGE_TOO_LARGE "
           "over it; docs/limits.md), which this value does not change."),
    _topic("errors.deadletterqueue.group.enable", T.BOOLEAN, False, None, (), _N,
           "Accepted, no effect: lets share groups write undeliverable records to the topic; oncelog has "
           "no share groups."),
    _topic("internal.segment.bytes", T.INT, None, None, (), _H,
           "Kafka 4.x's testing-only override of segment.bytes without its 1 MiB minimum; never "
           "described.", internal=True),
]

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {c.name: c for c in _TOPIC_LIST}

# Topic config -> its first broker synonym (Kafka's TOPIC_CONFIG_SYNONYMS): the broker config
# whose name DescribeConfigs lists synonyms under, and the one that is dynamically updatable.
PRIMARY_SYNONYM: dict[str, str] = {c.name: c.synonyms[0].name for c in _TOPIC_LIST if c.synonyms}

# Broker config -> (topic config, factor) for every synonym.
_SYNONYM_OF: dict[str, tuple[str, int]] = {s.name: (c.name, s.factor) for c in _TOPIC_LIST for s in c.synonyms}
TOPIC_SYNONYM_NAMES = frozenset(_SYNONYM_OF)


def synonym_target(broker_name: str) -> str | None:
    """The topic config a broker config is a synonym of (log.retention.hours -> retention.ms)."""
    found = _SYNONYM_OF.get(broker_name)
    return found[0] if found else None


def broker_synonyms(broker_name: str) -> list[str]:
    """Kafka's DynamicBrokerConfig.brokerConfigSynonyms (without listener overrides): the names
    that set the same thing, in precedence order."""
    topic = _SYNONYM_OF.get(broker_name)
    if topic is None or broker_name == "log.flush.scheduler.interval.ms":  # Kafka: not symmetric
        return [broker_name]
    names = [s.name for s in TOPIC_CONFIGS[topic[0]].synonyms]
    # Only these multi-name groups are synonyms of each other in Kafka (log.roll.*, log.roll.jitter.*,
    # log.flush.interval.ms + scheduler, log.retention.*); every other topic synonym stands alone.
    return names if len(names) > 1 else [broker_name]


# ------------------------------------------------------------------------------------------
# Broker configs.


@dataclass(frozen=True)
class BrokerConfigDef:
    """One broker config: Kafka's name, type, default and validator, oncelog's default where it
    differs, whether AlterConfigs may change it at run time — and where it goes:

    ``setting``  the :class:`~oncelog.config.settings.BrokerConfig` field it sets, dotted for the
                 nested ones (``group.min_session_timeout_ms``), in the config's own unit times
                 ``factor`` (offsets.retention.minutes -> ``group.offsets_retention_ms``: 60000).
                 None: read where it is used, from the broker's config layers (the topic configs'
                 broker synonyms build ``BrokerConfig.log``; a dynamic one is read live).
    ``flag``     the ``oncelog serve`` option that is a shorthand for it; ``flag_kind`` says how
                 the option's text becomes the config's value (``int``, ``size`` for 1g/64m/...,
                 ``str``, ``negate`` for a switch that sets a boolean to false); ``flag_help``
                 the option's help line (the default is appended).
    ``handling`` HONOURED, or NO_EFFECT for the configs that mean nothing on one broker (replication
                 factors): accepted with an INFO line at start.

    This entry is the only place a broker setting is declared: the serve options, their defaults,
    ``BrokerConfig``'s defaults, ``--config``/``--override`` and DescribeConfigs all come from it
    (``tests/config`` checks that they agree)."""

    name: str
    type: ConfigType
    kafka_default: str | None
    dynamic: str | None  # "cluster-wide" (default or per broker) | None: read-only (static)
    doc: str
    oncelog_default: str | None = None  # where oncelog's default differs from Kafka's
    validator: Validator | None = None
    setting: str | None = None
    factor: int = 1
    flag: str | None = None
    flag_kind: str = "int"
    flag_help: str = ""
    handling: Handling = Handling.HONOURED

    @property
    def default(self) -> str | None:
        return self.oncelog_default if self.oncelog_default is not None else self.kafka_default


def _broker_from_topic() -> list[BrokerConfigDef]:
    out = []
    kafka_types = {"log.roll.hours": T.INT, "log.roll.jitter.hours": T.INT, "log.retention.minutes": T.INT,
                   "log.retention.hours": T.INT}
    # Kafka's broker defaults where they are not the topic default (null: derived from a synonym).
    kafka_defaults = {"log.roll.ms": None, "log.roll.hours": "168", "log.roll.jitter.ms": None,
                      "log.roll.jitter.hours": "0", "log.retention.ms": None, "log.retention.minutes": None,
                      "log.retention.hours": "168", "log.flush.interval.ms": None,
                      "log.flush.scheduler.interval.ms": str(LONG_MAX)}
    validators = {"log.roll.hours": at_least(1), "log.roll.jitter.hours": at_least(0)}
    # The serve options that set a topic config's broker default (BrokerConfig.log).
    flags = {"log.segment.bytes": ("--segment-bytes", "size", "segment size, e.g. 1g"),
             "log.roll.ms": ("--segment-ms", "int", "segment age before rolling"),
             "log.retention.ms": ("--retention-ms", "int", "-1 keeps forever"),
             "log.retention.bytes": ("--retention-bytes", "size", "per partition; -1 = no limit"),
             "message.max.bytes": ("--max-message-bytes", "size", "largest record batch a producer may send")}
    for c in _TOPIC_LIST:
        for i, s in enumerate(c.synonyms):
            ctype = kafka_types.get(s.name, c.type)
            default = kafka_defaults[s.name] if s.name in kafka_defaults else to_wire(c.default, c.type)
            validator = validators.get(s.name, c.validator if s.factor == 1 else None)
            # Kafka: only the first synonym of each topic config is dynamically updatable.
            dynamic = "cluster-wide" if i == 0 else None
            flag, kind, flag_help = flags.get(s.name, (None, "int", ""))
            out.append(BrokerConfigDef(s.name, ctype, default, dynamic,
                                       f"Broker default of the topic config {c.name}"
                                       + (f" (in units of {s.factor} ms)" if s.factor > 1 else "")
                                       + f". {c.doc}", validator=validator, flag=flag, flag_kind=kind,
                                       flag_help=flag_help))
    return out


_BROKER_OWN = [
    BrokerConfigDef("node.id", T.INT, "-1", None, "This broker's id in Metadata, FindCoordinator and replica "
                    "assignments; recorded in the data dir (meta.json), which then refuses another id.",
                    oncelog_default="1", validator=at_least(0), setting="node_id", flag="--node-id",
                    flag_help="Kafka's node.id: this broker's id in Metadata and replica assignments (recorded in "
                              "the data dir, which then refuses another id)"),
    BrokerConfigDef("broker.id", T.INT, "-1", None, "Same as node.id.", oncelog_default="1",
                    validator=at_least(0), setting="node_id"),
    BrokerConfigDef("listeners", T.STRING, "PLAINTEXT://:9092", None,
                    "Where the broker listens (serve --host/--port): NAME://HOST:PORT, one PLAINTEXT listener "
                    "(listeners named in controller.listener.names are not opened: oncelog has no controller "
                    "quorum); an empty host is every interface, as in Kafka. oncelog cannot change it while "
                    "running (Kafka can, per broker).", oncelog_default="PLAINTEXT://127.0.0.1:9092"),
    BrokerConfigDef("advertised.listeners", T.STRING, None, None,
                    "The address handed to clients in Metadata (serve --advertise; else the listener). oncelog "
                    "cannot change it while running (Kafka can, per broker)."),
    BrokerConfigDef("listener.security.protocol.map", T.STRING,
                    "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
                    None, "Listener name -> security protocol; oncelog serves PLAINTEXT listeners only."),
    BrokerConfigDef("log.dirs", T.STRING, None, None, "The data directory (serve --data-dir); one directory "
                    "(oncelog has no JBOD). log.dir is read when log.dirs is not given, as in Kafka.",
                    setting="data_dir", flag="--data-dir", flag_kind="str",
                    flag_help="directory for logs and metadata (Kafka's log.dirs)"),
    BrokerConfigDef("log.dir", T.STRING, "/tmp/kafka-logs", None, "The data directory when log.dirs is not given."),
    BrokerConfigDef("num.partitions", T.INT, "1", None, "Partitions of auto-created topics and of "
                    "CreateTopics with num_partitions -1.", validator=at_least(1), setting="num_partitions",
                    flag="--num-partitions", flag_help="partitions of auto-created topics"),
    BrokerConfigDef("auto.create.topics.enable", T.BOOLEAN, "true", None,
                    "Metadata for an unknown topic creates it (serve --no-auto-create-topics turns it off).",
                    setting="auto_create_topics", flag="--no-auto-create-topics", flag_kind="negate",
                    flag_help="refuse Metadata for unknown topics (auto.create.topics.enable=false)"),
    BrokerConfigDef("socket.request.max.bytes", T.INT, str(100 * 1024 * 1024), None,
                    "A request frame declaring more closes the connection before anything is allocated for it; "
                    "a frame's buffer grows as its bytes arrive (a declared size reserves nothing).",
                    validator=at_least(1), setting="socket_request_max_bytes", flag="--socket-request-max-bytes",
                    flag_kind="size", flag_help="a request frame declaring more closes the connection before "
                                                "anything is allocated for it (100m, as Kafka)"),
    BrokerConfigDef("queued.max.request.bytes", T.LONG, "-1", None,
                    "Bytes of requests received and not yet answered, over all connections (frames being "
                    "received count as they arrive). At the limit the broker stops reading from connections "
                    "until answers free memory (clients see latency, never an error); one frame already being "
                    "received may finish, so memory is bounded by this + one request + 64 KiB per connection. "
                    "oncelog's default bounds memory (Kafka's -1, unbounded, lets stalled or pipelining clients "
                    "take all of it); <= 0 is unbounded. oncelog cannot change it while running.",
                    oncelog_default=str(100 * 1024 * 1024), setting="queued_max_request_bytes",
                    flag="--queued-max-request-bytes", flag_kind="size",
                    flag_help="bytes of requests received and not yet answered, over all connections; at the limit "
                              "the broker stops reading until answers free memory (Kafka's -1 is unbounded; <= 0 "
                              "unbounded)"),
    BrokerConfigDef("max.connections", T.INT, str(INT_MAX), None,
                    "Connections accepted at once; one over it is closed at once (logged, rate limited). "
                    "oncelog's default keeps a flood of connections below the open-file limit (which serve "
                    "raises to fit); Kafka's is unbounded. oncelog cannot change it while running (Kafka can).",
                    oncelog_default="1000", validator=at_least(0), setting="max_connections",
                    flag="--max-connections", flag_help="connections at once; one more is closed at once "
                                                        "(Kafka's is unbounded)"),
    BrokerConfigDef("max.connections.per.ip", T.INT, str(INT_MAX), None,
                    "Connections accepted at once from one IP address; one over it is closed at once (logged, "
                    "rate limited). oncelog cannot change it while running (Kafka can).", validator=at_least(0),
                    setting="max_connections_per_ip", flag="--max-connections-per-ip",
                    flag_help="connections at once from one address; one more is closed at once (as Kafka)"),
    BrokerConfigDef("connections.max.idle.ms", T.LONG, "600000", None,
                    "A connection with no request received, in progress or unanswered for this long is closed "
                    "(clients reconnect); -1 never. Checked by one sweep every min(1 s, a quarter of this).",
                    setting="connections_max_idle_ms", flag="--connections-max-idle-ms",
                    flag_help="close a connection with nothing received, in progress or unanswered for this long "
                              "(as Kafka; -1 never)"),
    BrokerConfigDef("oncelog.request.read.timeout.ms", T.LONG, None, None,
                    "oncelog's own (Kafka has none): a request frame must arrive completely within this long of "
                    "its first byte, else the connection is closed and the partial frame freed (slowloris). Time "
                    "the broker itself paused reading (queued.max.request.bytes) does not count; <= 0 never.",
                    oncelog_default="30000", setting="request_read_timeout_ms", flag="--request-read-timeout-ms",
                    flag_help="oncelog's own: a request frame must arrive completely within this long of its first "
                              "byte, else the connection is closed (slowloris; <= 0 never)"),
    BrokerConfigDef("default.replication.factor", T.INT, "1", None, "Always 1: one broker.",
                    handling=Handling.NO_EFFECT),
    BrokerConfigDef("offsets.topic.replication.factor", T.SHORT, "3", None, "Always 1: one broker.",
                    oncelog_default="1", handling=Handling.NO_EFFECT),
    BrokerConfigDef("offsets.topic.num.partitions", T.INT, "50", None, "Partitions of __consumer_offsets.",
                    oncelog_default="10", validator=at_least(1), setting="offsets_topic_partitions",
                    flag="--offsets-topic-partitions", flag_help="partitions of __consumer_offsets"),
    BrokerConfigDef("offsets.topic.segment.bytes", T.INT, str(100 * 1024 * 1024), None,
                    "Segment size of __consumer_offsets (compaction works on closed segments).",
                    oncelog_default=str(16 << 20), validator=at_least(1), setting="offsets_topic_segment_bytes",
                    flag="--offsets-topic-segment-bytes", flag_kind="size",
                    flag_help="segment size of __consumer_offsets (compaction works on closed segments)"),
    BrokerConfigDef("offsets.retention.minutes", T.INT, "10080", None,
                    "Committed offsets of a group without members are dropped this long after their commit "
                    "(or after the group emptied).", validator=at_least(1),
                    setting="group.offsets_retention_ms", factor=MINUTES),
    BrokerConfigDef("transaction.state.log.num.partitions", T.INT, "50", None,
                    "Partitions of __transaction_state.", oncelog_default="10", validator=at_least(1),
                    setting="transaction_topic_partitions"),
    BrokerConfigDef("transaction.state.log.segment.bytes", T.INT, str(100 * 1024 * 1024), None,
                    "Segment size of __transaction_state (compaction works on closed segments: records an "
                    "expired id's tombstone supersedes, and the tombstone itself after delete.retention.ms, go "
                    "once their segment is closed).", oncelog_default=str(16 << 20), validator=at_least(1),
                    setting="transaction_topic_segment_bytes"),
    BrokerConfigDef("transaction.state.log.replication.factor", T.SHORT, "3", None, "Always 1: one broker.",
                    oncelog_default="1", handling=Handling.NO_EFFECT),
    BrokerConfigDef("transaction.max.timeout.ms", T.INT, "900000", None,
                    "The longest transaction.timeout.ms InitProducerId accepts (INVALID_TRANSACTION_TIMEOUT above).",
                    validator=at_least(1), setting="txn.max_timeout_ms", flag="--transaction-max-timeout-ms",
                    flag_help="the longest transaction.timeout.ms a producer may ask for (as Kafka)"),
    BrokerConfigDef("transactional.id.expiration.ms", T.INT, "604800000", None,
                    "A transactional id idle this long (no transaction open) is forgotten (a tombstone in "
                    "__transaction_state).", validator=at_least(1), setting="txn.transactional_id_expiration_ms"),
    BrokerConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", T.INT, "3600000", None,
                    "How often the transaction coordinator looks for transactional ids to expire "
                    "(transactional.id.expiration.ms); it counts on the broker's clock.", validator=at_least(1),
                    setting="txn.remove_expired_interval_ms"),
    BrokerConfigDef("producer.id.expiration.ms", T.INT, "86400000", "cluster-wide",
                    "A producer id's state on a partition (epoch, last sequences) is dropped once the producer "
                    "has written nothing there for this long and has no transaction open there; it is not "
                    "loaded again at a restart.", validator=at_least(1), setting="producer_id_expiration_ms"),
    BrokerConfigDef("producer.id.expiration.check.interval.ms", T.INT, "600000", None,
                    "How often partitions drop expired producer ids (producer.id.expiration.ms).",
                    validator=at_least(1)),
    BrokerConfigDef("group.initial.rebalance.delay.ms", T.INT, "3000", None,
                    "How long the first rebalance of an empty group waits for more members.",
                    setting="group.initial_rebalance_delay_ms", flag="--group-initial-rebalance-delay-ms",
                    flag_help="how long the first rebalance of an empty group waits for more members (as Kafka; "
                              "0 = none)"),
    BrokerConfigDef("group.min.session.timeout.ms", T.INT, "6000", None,
                    "Smallest session.timeout.ms a JoinGroup may ask for (INVALID_SESSION_TIMEOUT below it).",
                    setting="group.min_session_timeout_ms", flag="--group-min-session-timeout-ms",
                    flag_help="the shortest session.timeout.ms a JoinGroup may ask for (INVALID_SESSION_TIMEOUT "
                              "below it; as Kafka)"),
    BrokerConfigDef("group.max.session.timeout.ms", T.INT, "1800000", None,
                    "Largest session.timeout.ms a JoinGroup may ask for (INVALID_SESSION_TIMEOUT above it).",
                    setting="group.max_session_timeout_ms", flag="--group-max-session-timeout-ms",
                    flag_help="the longest session.timeout.ms a JoinGroup may ask for (INVALID_SESSION_TIMEOUT "
                              "above it; as Kafka)"),
    BrokerConfigDef("group.max.size", T.INT, str(INT_MAX), None,
                    "Members a classic group may have; one more is answered GROUP_MAX_SIZE_REACHED. oncelog's "
                    "default bounds a group's memory.", oncelog_default="1000000", validator=at_least(1),
                    setting="group.max_size"),
    # KIP-848 consumer groups (group.protocol=consumer).
    BrokerConfigDef("group.consumer.session.timeout.ms", T.INT, "45000", None,
                    "A consumer-protocol member that sends no ConsumerGroupHeartbeat for this long is removed.",
                    validator=at_least(1), setting="group.consumer_session_timeout_ms",
                    flag="--group-consumer-session-timeout-ms",
                    flag_help="how long a consumer-protocol member may go without a heartbeat (as Kafka)"),
    BrokerConfigDef("group.consumer.heartbeat.interval.ms", T.INT, "5000", None,
                    "How often consumer-protocol members are told to heartbeat.", validator=at_least(1),
                    setting="group.consumer_heartbeat_interval_ms", flag="--group-consumer-heartbeat-interval-ms",
                    flag_help="how often consumer-protocol members heartbeat (as Kafka)"),
    BrokerConfigDef("group.consumer.min.session.timeout.ms", T.INT, "45000", None,
                    "The shortest group.consumer.session.timeout.ms allowed (the broker refuses to start below it). "
                    "oncelog's default lets one broker (and its tests) use short sessions without a second "
                    "setting.", oncelog_default="1", validator=at_least(1),
                    setting="group.consumer_min_session_timeout_ms"),
    BrokerConfigDef("group.consumer.max.session.timeout.ms", T.INT, "60000", None,
                    "The longest group.consumer.session.timeout.ms allowed.", validator=at_least(1),
                    setting="group.consumer_max_session_timeout_ms"),
    BrokerConfigDef("group.consumer.min.heartbeat.interval.ms", T.INT, "5000", None,
                    "The shortest group.consumer.heartbeat.interval.ms allowed. oncelog's default: as "
                    "group.consumer.min.session.timeout.ms.", oncelog_default="1", validator=at_least(1),
                    setting="group.consumer_min_heartbeat_interval_ms"),
    BrokerConfigDef("group.consumer.max.heartbeat.interval.ms", T.INT, "15000", None,
                    "The longest group.consumer.heartbeat.interval.ms allowed.", validator=at_least(1),
                    setting="group.consumer_max_heartbeat_interval_ms"),
    BrokerConfigDef("group.consumer.assignment.interval.ms", T.INT, "1000", None,
                    "A consumer group's target assignment is computed again at most this often (KIP-1263): "
                    "changes meanwhile (members joining, leaving) are assigned together.", validator=at_least(0),
                    setting="group.consumer_assignment_interval_ms",
                    flag="--group-consumer-assignment-interval-ms",
                    flag_help="the least time between two assignments of a consumer group (as Kafka; 0 = at once)"),
    BrokerConfigDef("group.consumer.min.assignment.interval.ms", T.INT, "0", None,
                    "The shortest group.consumer.assignment.interval.ms allowed.", validator=at_least(0),
                    setting="group.consumer_min_assignment_interval_ms"),
    BrokerConfigDef("group.consumer.max.assignment.interval.ms", T.INT, "15000", None,
                    "The longest group.consumer.assignment.interval.ms allowed.", validator=at_least(0),
                    setting="group.consumer_max_assignment_interval_ms"),
    BrokerConfigDef("group.consumer.assignor.offload.enable", T.BOOLEAN, "true", None,
                    "Kafka computes assignments on a background thread; oncelog's assignors run in the "
                    "coordinator (they take well under a millisecond for small groups): no effect.",
                    handling=Handling.NO_EFFECT),
    BrokerConfigDef("group.consumer.max.size", T.INT, str(INT_MAX), None,
                    "Members a consumer-protocol group may have; one more is answered GROUP_MAX_SIZE_REACHED. "
                    "oncelog's default bounds a group's memory.", oncelog_default="1000000", validator=at_least(1),
                    setting="group.consumer_max_size"),
    BrokerConfigDef("group.consumer.assignors", T.LIST, _CONSUMER_ASSIGNORS_KAFKA, None,
                    "The server-side assignors consumer-protocol groups may use, the first the default "
                    "(uniform, range; Kafka's class names are accepted).", oncelog_default="uniform,range",
                    validator=list_of("uniform", "range", *_CONSUMER_ASSIGNORS_KAFKA.split(",")),
                    setting="group.consumer_assignors"),
    BrokerConfigDef("group.consumer.migration.policy", T.STRING, "bidirectional", None,
                    "Conversion between classic and consumer groups with members (Kafka's online migration). oncelog "
                    "converts an empty group either way whatever this says (as Kafka) and a group with members "
                    "never: accepted for compatibility, no effect.",
                    validator=one_of("disabled", "upgrade", "downgrade", "bidirectional"),
                    setting="group.consumer_migration_policy", handling=Handling.NO_EFFECT),
    # KIP-932 share groups: Kafka 4.4's GroupCoordinatorConfig (members, session, heartbeat) and
    # ShareGroupConfig (sessions, locks, deliveries) settings, with their ranges; the cross-checks
    # (min <= value <= max, sessions >= members) are GroupConfig.share_settings_error's.
    BrokerConfigDef("group.share.max.size", T.INT, "200", None,
                    "Members a share group may have; one more is answered GROUP_MAX_SIZE_REACHED.",
                    validator=between(1, 1000), setting="group.share_max_size"),
    BrokerConfigDef("group.share.max.share.sessions", T.INT, "2000", None,
                    "Share sessions this broker keeps at once (one per share consumer fetching from it); one "
                    "more is answered SHARE_SESSION_LIMIT_REACHED. At least group.share.max.size.",
                    validator=at_least(1), setting="group.share_max_share_sessions"),
    BrokerConfigDef("group.share.session.timeout.ms", T.INT, "45000", None,
                    "A share group member that sends no ShareGroupHeartbeat for this long is removed; the "
                    "default of a group's share.session.timeout.ms.", validator=at_least(1),
                    setting="group.share_session_timeout_ms"),
    BrokerConfigDef("group.share.min.session.timeout.ms", T.INT, "45000", None,
                    "The shortest group.share.session.timeout.ms (and group share.session.timeout.ms) allowed.",
                    validator=at_least(1), setting="group.share_min_session_timeout_ms"),
    BrokerConfigDef("group.share.max.session.timeout.ms", T.INT, "60000", None,
                    "The longest group.share.session.timeout.ms (and group share.session.timeout.ms) allowed.",
                    validator=at_least(1), setting="group.share_max_session_timeout_ms"),
    BrokerConfigDef("group.share.heartbeat.interval.ms", T.INT, "5000", None,
                    "How often share group members are told to heartbeat; the default of a group's "
                    "share.heartbeat.interval.ms.", validator=at_least(1),
                    setting="group.share_heartbeat_interval_ms"),
    BrokerConfigDef("group.share.min.heartbeat.interval.ms", T.INT, "5000", None,
                    "The shortest group.share.heartbeat.interval.ms (and group share.heartbeat.interval.ms) "
                    "allowed.", validator=at_least(1), setting="group.share_min_heartbeat_interval_ms"),
    BrokerConfigDef("group.share.max.heartbeat.interval.ms", T.INT, "15000", None,
                    "The longest group.share.heartbeat.interval.ms (and group share.heartbeat.interval.ms) "
                    "allowed.", validator=at_least(1), setting="group.share_max_heartbeat_interval_ms"),
    BrokerConfigDef("group.share.record.lock.duration.ms", T.INT, "30000", None,
                    "How long a record delivered to a share consumer stays acquired by it (ShareFetch's "
                    "acquisition_lock_timeout_ms); the default of a group's share.record.lock.duration.ms.",
                    validator=between(1000, 3600000), setting="group.share_record_lock_duration_ms"),
    BrokerConfigDef("group.share.min.record.lock.duration.ms", T.INT, "15000", None,
                    "The shortest share.record.lock.duration.ms a group may set.", validator=between(1000, 30000),
                    setting="group.share_min_record_lock_duration_ms"),
    BrokerConfigDef("group.share.max.record.lock.duration.ms", T.INT, "60000", None,
                    "The longest share.record.lock.duration.ms a group may set.",
                    validator=between(30000, 3600000), setting="group.share_max_record_lock_duration_ms"),
    BrokerConfigDef("group.share.delivery.count.limit", T.INT, "5", None,
                    "Deliveries of a record to a share group before it is archived; the default of a group's "
                    "share.delivery.count.limit.", validator=between(2, 10),
                    setting="group.share_delivery_count_limit"),
    BrokerConfigDef("group.share.min.delivery.count.limit", T.INT, "2", None,
                    "The smallest share.delivery.count.limit a group may set.", validator=between(2, 5),
                    setting="group.share_min_delivery_count_limit"),
    BrokerConfigDef("group.share.max.delivery.count.limit", T.INT, "10", None,
                    "The largest share.delivery.count.limit a group may set.", validator=between(5, 25),
                    setting="group.share_max_delivery_count_limit"),
    BrokerConfigDef("group.share.partition.max.record.locks", T.INT, "2000", None,
                    "Records of one share partition acquired and not yet acknowledged at once (a fetch may "
                    "finish the log batch it is in); the default of a group's share.partition.max.record.locks.",
                    validator=between(100, 10000), setting="group.share_partition_max_record_locks"),
    BrokerConfigDef("group.share.min.partition.max.record.locks", T.INT, "100", None,
                    "The smallest share.partition.max.record.locks a group may set.", validator=between(100, 2000),
                    setting="group.share_min_partition_max_record_locks"),
    BrokerConfigDef("group.share.max.partition.max.record.locks", T.INT, "4000", None,
                    "The largest share.partition.max.record.locks a group may set.",
                    validator=between(2000, 10000), setting="group.share_max_partition_max_record_locks"),
    BrokerConfigDef("log.retention.check.interval.ms", T.LONG, "300000", None,
                    "How often retention runs (serve --retention-check-ms).", validator=at_least(1),
                    setting="log_retention_check_interval_ms", flag="--retention-check-ms",
                    flag_help="how often retention runs"),
    BrokerConfigDef("log.flush.offset.checkpoint.interval.ms", T.INT, "60000", None,
                    "How often each partition's recovery point is checkpointed (recovery after a crash "
                    "re-validates what was written since). oncelog's default keeps that short.",
                    oncelog_default="10000", validator=at_least(1),
                    setting="log_flush_offset_checkpoint_interval_ms"),
    BrokerConfigDef("log.cleaner.backoff.ms", T.LONG, "15000", "cluster-wide",
                    "How often the log cleaner looks for partitions to compact (serve --log-cleaner-interval-ms).",
                    oncelog_default="30000", validator=at_least(0), setting="log_cleaner_backoff_ms",
                    flag="--log-cleaner-interval-ms", flag_help="how often compaction runs"),
    # Security. TLS settings apply to SSL and SASL_SSL listeners; each may be given per
    # listener as listener.name.<listener, lower case>.<name>, which wins for that listener.
    BrokerConfigDef("ssl.keystore.type", T.STRING, "JKS", None, "The key store's format: PEM only (oncelog reads "
                    "PEM files; convert a JKS or PKCS12 store with keytool/openssl).", oncelog_default="PEM",
                    validator=one_of("PEM")),
    BrokerConfigDef("ssl.keystore.location", T.STRING, None, None,
                    "A PEM file with the broker's certificate chain and its private key."),
    BrokerConfigDef("ssl.keystore.certificate.chain", T.PASSWORD, None, None,
                    "The broker's certificate chain as PEM text (instead of ssl.keystore.location)."),
    BrokerConfigDef("ssl.keystore.key", T.PASSWORD, None, None,
                    "The broker's private key as PEM text (with ssl.keystore.certificate.chain)."),
    BrokerConfigDef("ssl.key.password", T.PASSWORD, None, None, "The password of an encrypted private key."),
    BrokerConfigDef("ssl.truststore.type", T.STRING, "JKS", None, "The trust store's format: PEM only.",
                    oncelog_default="PEM", validator=one_of("PEM")),
    BrokerConfigDef("ssl.truststore.location", T.STRING, None, None,
                    "A PEM file of the certificate authorities that client certificates must chain to (mTLS)."),
    BrokerConfigDef("ssl.truststore.certificates", T.PASSWORD, None, None,
                    "The trusted certificates as PEM text (instead of ssl.truststore.location)."),
    BrokerConfigDef("ssl.client.auth", T.STRING, "none", None,
                    "none | requested | required: whether a client certificate is asked for (mTLS); a client's "
                    "principal is then User:<the certificate's subject DN, RFC 2253> (Kafka's DEFAULT rule).",
                    validator=one_of("required", "requested", "none")),
    BrokerConfigDef("ssl.enabled.protocols", T.LIST, "TLSv1.2,TLSv1.3", None,
                    "TLS versions accepted; TLS 1.2 and 1.3 only.", validator=list_of("TLSv1.2", "TLSv1.3")),
    BrokerConfigDef("ssl.principal.mapping.rules", T.STRING, "DEFAULT", None,
                    "How a certificate's DN becomes a principal: DEFAULT (the whole DN) only, for now.",
                    validator=one_of("DEFAULT")),
    BrokerConfigDef("sasl.enabled.mechanisms", T.LIST, "GSSAPI", None,
                    "The SASL mechanisms a SASL listener offers (per listener: listener.name.<l>.sasl.enabled."
                    "mechanisms). PLAIN needs listener.name.<l>.plain.sasl.jaas.config with user_<name>=\"<password>\" "
                    "entries; SCRAM uses the credentials of AlterUserScramCredentials; OAUTHBEARER needs "
                    "listener.name.<l>.oauthbearer.sasl.jaas.config (unsecured JWS; signed tokens with "
                    "sasl.oauthbearer.jwks.endpoint.url). oncelog has no GSSAPI "
                    "(Kerberos), Kafka's default.", oncelog_default="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                    validator=list_of("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")),
    BrokerConfigDef("sasl.jaas.config", T.PASSWORD, None, None,
                    "A SASL mechanism's JAAS configuration; a broker takes it per listener and mechanism: "
                    "listener.name.<listener>.<mechanism>.sasl.jaas.config."),
    BrokerConfigDef("sasl.server.callback.handler.class", T.CLASS, None, None,
                    "Per listener and mechanism (listener.name.<l>.oauthbearer.sasl.server.callback.handler.class): "
                    "Kafka's OAuthBearerValidatorCallbackHandler (signed tokens, which needs sasl.oauthbearer.jwks."
                    "endpoint.url) or the unsecured one. oncelog needs no class: a configured JWKS URL switches "
                    "OAUTHBEARER to signed tokens.",
                    validator=one_of(*OAUTHBEARER_VALIDATOR_CLASSES, OAUTHBEARER_UNSECURED_VALIDATOR_CLASS)),
    BrokerConfigDef("sasl.oauthbearer.jwks.endpoint.url", T.STRING, None, None,
                    "KIP-768: where the keys that sign OAUTHBEARER tokens are, a file: URL of a JWKS JSON file "
                    "(read at start; oncelog fetches nothing over http(s)). Set (broker-wide or listener.name.<l>."
                    "oauthbearer.sasl.oauthbearer.jwks.endpoint.url), OAUTHBEARER takes only tokens signed "
                    "(RS256/384/512, PS256/384/512, ES256/384) by a key of it, chosen by kid; unset, unsecured JWS."),
    BrokerConfigDef("sasl.oauthbearer.expected.audience", T.LIST, None, None,
                    "Signed OAUTHBEARER tokens: the token's aud must name one of these; unset, a token with an aud "
                    "is refused (as Kafka's jose4j validator)."),
    BrokerConfigDef("sasl.oauthbearer.expected.issuer", T.STRING, None, None,
                    "Signed OAUTHBEARER tokens: the token's iss must equal this."),
    BrokerConfigDef("sasl.oauthbearer.sub.claim.name", T.STRING, "sub", None,
                    "Signed OAUTHBEARER tokens: the claim naming the principal (User:<value>)."),
    BrokerConfigDef("sasl.oauthbearer.scope.claim.name", T.STRING, "scope", None,
                    "Signed OAUTHBEARER tokens: the claim holding the scopes."),
    BrokerConfigDef("sasl.oauthbearer.clock.skew.seconds", T.INT, "30", None,
                    "Signed OAUTHBEARER tokens: the leeway in seconds on exp, iat and nbf.", validator=at_least(0)),
    BrokerConfigDef("connections.max.reauth.ms", T.LONG, "0", None,
                    "KIP-368: a SASL session lasts at most this long (or until its OAUTHBEARER token expires); the "
                    "client is told the lifetime in SaslAuthenticate and must re-authenticate on the same "
                    "connection before it ends, else its next request closes the connection. 0: sessions "
                    "never expire.", validator=at_least(0), setting="connections_max_reauth_ms"),
    BrokerConfigDef("sasl.server.max.receive.size", T.INT, str(512 * 1024), None,
                    "The largest request frame a SASL listener reads before and during a connection's first "
                    "authentication (ApiVersions, SaslHandshake, SaslAuthenticate); a larger size prefix closes "
                    "the connection. Those frames are read outside queued.max.request.bytes, so unauthenticated "
                    "clients cannot take request memory from authenticated ones.",
                    validator=at_least(1), setting="sasl_server_max_receive_size"),
    BrokerConfigDef("oncelog.allow.unauthenticated.listeners", T.BOOLEAN, None, None,
                    "oncelog's own: a PLAINTEXT or SSL listener without client certificates (no authentication: "
                    "every client is User:ANONYMOUS) may bind beyond loopback only when this is true; the broker "
                    "then logs a WARNING saying what any client can do. Kafka has no such guard.",
                    oncelog_default="false", setting="allow_unauthenticated_listeners"),
    BrokerConfigDef("authorizer.class.name", T.STRING, "", None,
                    "Kafka's StandardAuthorizer name (org.apache.kafka.metadata.authorizer.StandardAuthorizer) "
                    "switches ACLs on: CreateAcls/DescribeAcls/DeleteAcls then work (else SECURITY_DISABLED). "
                    "Empty: no authorizer.", validator=one_of("", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
                    setting="authorizer_class_name"),
    BrokerConfigDef("super.users", T.STRING, "", None,
                    "Principals allowed everything, separated by ';' (User:admin;User:CN=broker,O=Acme).",
                    setting="super_users"),
    BrokerConfigDef("allow.everyone.if.no.acl.found", T.BOOLEAN, "false", None,
                    "With an authorizer: a resource no ACL matches is open to everyone (true) or to super "
                    "users only (false, Kafka's default).", setting="allow_everyone_if_no_acl_found"),
    BrokerConfigDef("oncelog.metrics.listener", T.STRING, None, None,
                    "oncelog's own: HOST:PORT of the Prometheus metrics endpoint (GET /metrics, Kafka's metric "
                    "names as Prometheus's jmx_exporter gives them; docs/metrics.md). Empty: no endpoint. It "
                    "authenticates no one, so beyond loopback it needs "
                    "oncelog.allow.unauthenticated.listeners=true, as a listener does. On a cluster node K "
                    "listens on PORT+K-1.", oncelog_default="", validator=_metrics_listener,
                    setting="metrics_listener", flag="--metrics-listener", flag_kind="str",
                    flag_help="HOST:PORT of the Prometheus /metrics endpoint (off when empty)"),
    BrokerConfigDef("oncelog.fsync", T.STRING, None, None,
                    "oncelog's durability policy (serve --fsync): always | interval:MS | never.",
                    oncelog_default="always", setting="fsync", flag="--fsync", flag_kind="str",
                    flag_help="always | interval:MS | never"),
]

# Kafka broker configs a server.properties may carry that mean nothing to one oncelog process:
# accepted at start with one INFO line giving the reason (a name neither here nor in
# BROKER_CONFIGS is an error: Kafka would keep an unknown name for plugins; oncelog has none).
_SHARE_STATE_PLACEMENT = "__share_group_state is written where each share partition is led (docs/share-groups.md)"
NOT_HONOURED: dict[str, str] = {
    "process.roles": "oncelog is one process that is broker and controller at once (no KRaft quorum)",
    "controller.quorum.voters": "oncelog has no controller quorum",
    "controller.quorum.bootstrap.servers": "oncelog has no controller quorum",
    "controller.listener.names": "oncelog has no controller quorum; these listeners are not opened",
    "inter.broker.listener.name": "one broker: no inter-broker traffic",
    "security.inter.broker.protocol": "one broker: no inter-broker traffic",
    "num.network.threads": "one asyncio event loop serves every connection",
    "num.io.threads": "one asyncio event loop handles every request",
    "background.threads": "background work runs on the event loop",
    "num.replica.fetchers": "one broker: nothing to replicate",
    "num.recovery.threads.per.data.dir": "recovery validates the unflushed tail of each partition on one thread",
    "socket.send.buffer.bytes": "the operating system's socket buffer sizes are used",
    "socket.receive.buffer.bytes": "the operating system's socket buffer sizes are used",
    "transaction.state.log.min.isr": "one broker: every write is to the one replica",
    "offsets.topic.min.isr": "one broker: every write is to the one replica",
    "share.coordinator.state.topic.replication.factor": _SHARE_STATE_PLACEMENT,
    "share.coordinator.state.topic.min.isr": _SHARE_STATE_PLACEMENT,
    "group.coordinator.rebalance.protocols": (
        "deprecated in Kafka 4.4 (all protocols always on in 5.0): oncelog always serves the classic and "
        "consumer protocols, and share and streams groups"),
    "metadata.log.dir": "oncelog keeps no KRaft metadata log",
    "cluster.id": "the cluster id is created with the data dir (meta.json)",
}

BROKER_CONFIGS: dict[str, BrokerConfigDef] = {c.name: c for c in _broker_from_topic() + _BROKER_OWN}


def broker_type(name: str) -> ConfigType:
    d = BROKER_CONFIGS.get(name)
    return d.type if d is not None else ConfigType.UNKNOWN


# ------------------------------------------------------------------------------------------
# Broker layers and value resolution.

SOURCE_ORDER = (ConfigSource.DYNAMIC_BROKER, ConfigSource.DYNAMIC_DEFAULT_BROKER, ConfigSource.STATIC_BROKER,
                ConfigSource.DEFAULT)


@dataclass
class BrokerLayers:
    """A broker's config, as Kafka's DynamicBrokerConfig keeps it: per-broker dynamic configs
    override cluster-default dynamic ones, which override the static ones (``oncelog serve``
    options given), which override the defaults. Setting any name of a synonym group (e.g.
    log.retention.ms) hides the others of lower layers (Kafka's ``overrideProps``)."""

    static: dict[str, str] = field(default_factory=dict)
    dynamic_default: dict[str, str] = field(default_factory=dict)
    dynamic_broker: dict[str, str] = field(default_factory=dict)
    defaults: dict[str, str] = field(default_factory=dict)  # oncelog's own defaults of non-Kafka values

    def layer(self, source: ConfigSource) -> Mapping[str, str]:
        if source == ConfigSource.DYNAMIC_BROKER:
            return self.dynamic_broker
        if source == ConfigSource.DYNAMIC_DEFAULT_BROKER:
            return self.dynamic_default
        if source == ConfigSource.STATIC_BROKER:
            return self.static
        return self.default_values()

    def default_values(self) -> dict[str, str]:
        out = {n: d.default for n, d in BROKER_CONFIGS.items() if d.default is not None}
        out.update(self.defaults)
        return out

    def merged(self) -> dict[str, str]:
        """Broker name -> value in force (without the defaults)."""
        merged: dict[str, str] = dict(self.static)
        for layer in (self.dynamic_default, self.dynamic_broker):
            for k, v in layer.items():
                for s in broker_synonyms(k):
                    merged.pop(s, None)
                merged[k] = v
        return merged

    def value(self, name: str) -> str | None:
        """The value a broker config has (unset: its default; a synonym set in a higher layer
        hides it, as Kafka's overrideProps removes it)."""
        merged = self.merged()
        return merged[name] if name in merged else self.default_values().get(name)

    def topic_defaults(self) -> dict[str, object]:
        """Topic config -> its value for topics without an override (parsed): the first of its
        broker synonyms that is set, converted to the topic config's unit; else Kafka's default
        (which the broker synonyms' defaults, e.g. log.retention.hours=168, amount to)."""
        merged = self.merged()
        out = {}
        for c in _TOPIC_LIST:
            value = c.default
            for s in c.synonyms:
                if s.name in merged:
                    raw = parse_value(s.name, merged[s.name], broker_type(s.name))
                    value = raw * s.factor if raw is not None else None
                    break
            if c.type == T.LIST and isinstance(value, str):
                value = parse_value(c.name, value, T.LIST)
            out[c.name] = value
        return out

    def synonyms(self, name: str) -> list[tuple[str, str | None, ConfigSource]]:
        """Kafka's ConfigHelper.configSynonyms: for each layer in precedence order, each synonym
        name set in it; the list then starts at ``name`` (entries before it are dropped)."""
        names = broker_synonyms(name)
        found = []
        for src in SOURCE_ORDER:
            layer = self.layer(src)
            for n in names:
                if n in layer:
                    found.append((n, layer[n], src))
        while found and found[0][0] != name:
            found.pop(0)
        return found


# ------------------------------------------------------------------------------------------
# Validation.


def validate_topic_configs(overrides: Mapping[str, str | None], broker_topic_defaults: Mapping[str, object] | None = None,
                           *, strict: bool = True) -> dict[str, object]:
    """Validate a topic's overrides as Kafka 4.x does at CreateTopics and AlterConfigs
    (``ControllerConfigurationValidator`` then ``LogConfig.validate``), then what oncelog cannot
    honour. Returns every topic config's value (overrides over the broker's defaults). Raises
    ConfigError with Kafka's message.

    ``strict=False`` (topics the broker creates itself, and configs read back from disk) skips
    Kafka 4.x's 1 MiB minimum of segment.bytes, as Kafka's internal topics and its
    internal.segment.bytes do."""
    nulls = [k for k, v in overrides.items() if v is None]
    if nulls:
        raise ConfigError("Null value not supported for topic configs: " + ",".join(nulls))
    for name in overrides:
        if name not in TOPIC_CONFIGS:
            raise ConfigError(f"Unknown topic config name: {name}")
    base = dict(broker_topic_defaults) if broker_topic_defaults is not None else {
        c.name: (parse_value(c.name, c.default, T.LIST) if c.type == T.LIST else c.default) for c in _TOPIC_LIST}
    values = dict(base)
    for c in _TOPIC_LIST:  # Kafka's ConfigDef.parse: definition order, type then validator
        if c.name in overrides:
            values[c.name] = parse_value(c.name, overrides[c.name], c.type)
            v = values[c.name]
            if c.validator is not None and v is not None:
                if c.name == "segment.bytes" and not strict:
                    at_least(14)(c.name, v)
                else:
                    c.validator(c.name, v)
    check_topic_values(values)
    return values


def resolve_topic_values(overrides: Mapping[str, str], broker_topic_defaults: Mapping[str, object]
                         ) -> tuple[dict[str, object], list[str]]:
    """A topic's values from overrides already accepted once (read back from disk, or under new
    broker defaults): each override is parsed alone, without Kafka's cross-checks (which Kafka
    does not repeat either when broker defaults change). Returns (values, problems): an
    override that no longer parses is left out and described in ``problems``."""
    values = dict(broker_topic_defaults)
    problems = []
    for name, raw in overrides.items():
        c = TOPIC_CONFIGS.get(name)
        if c is None:
            problems.append(f"Unknown topic config name: {name}")
            continue
        try:
            values[name] = parse_value(name, raw, c.type)
        except ConfigError as exc:
            problems.append(str(exc))
    return values, problems


def check_topic_values(values: Mapping[str, object]) -> None:
    """Kafka's LogConfig.validateValues and its tiered-storage check on a full set of values,
    then the values oncelog cannot honour."""
    lo, hi = values["min.compaction.lag.ms"], values["max.compaction.lag.ms"]
    if lo > hi:
        raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({lo}) > max.compaction.lag.ms ({hi})")
    if values["remote.storage.enable"]:
        raise ConfigError("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with "
                          "remote log storage. (oncelog has no tiered storage.)")
    for c in _TOPIC_LIST:
        if c.refuse is not None:
            reason = c.refuse(values[c.name])
            if reason:
                raise _invalid(c.name, values[c.name], reason)


def unknown_broker_config(name: str) -> str:
    return (f"oncelog has no broker config {name}: Kafka would store an unknown name for plugins, oncelog has "
            f"none, so it is refused rather than kept and ignored")


def validate_broker_configs(props: Mapping[str, str | None], *, per_broker: bool) -> dict[str, object]:
    """Validate a dynamic broker config set as Kafka's DynamicBrokerConfig.validateConfigs does
    (every failure is INVALID_REQUEST there: RequestError). Returns the parsed values."""
    nondynamic = [n for n in props if n in BROKER_CONFIGS and BROKER_CONFIGS[n].dynamic is None]
    if nondynamic:
        raise RequestError("Cannot update these configs dynamically: [" + ", ".join(nondynamic) + "]")
    unknown = [n for n in props if n not in BROKER_CONFIGS]
    if unknown:
        raise RequestError(unknown_broker_config(unknown[0]))
    parsed = {}
    for name, raw in props.items():
        d = BROKER_CONFIGS[name]
        try:
            v = parse_value(name, raw, d.type)
            if d.validator is not None and v is not None:
                d.validator(name, v)
        except ConfigError as exc:
            raise RequestError(str(exc)) from None
        parsed[name] = v
    return parsed


# ------------------------------------------------------------------------------------------
# IncrementalAlterConfigs.

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}


def apply_incremental(current: Mapping[str, str], ops: Iterable[tuple[str, int, str | None]],
                      list_default: Callable[[str], str | None], is_list: Callable[[str], bool]) -> dict[str, str]:
    """Kafka's ConfigurationControlManager.incrementalAlterConfigResource: SET, DELETE, and for
    LIST configs APPEND / SUBTRACT starting from the current value or, unset, the default."""
    out = dict(current)
    for name, op, value in ops:
        if op == OP_SET:
            out[name] = value
        elif op == OP_DELETE:
            out.pop(name, None)
        elif op in (OP_APPEND, OP_SUBTRACT):
            if not is_list(name):
                raise ConfigError(f"Can't {OP_NAMES[op]} to key {name} because its type is not LIST.")
            old = out.get(name)
            if old is None:
                old = list_default(name)
            parts = [p for p in (old or "").split(",") if p]
            if op == OP_APPEND:
                for v in value.split(","):
                    if v not in parts:
                        parts.append(v)
            else:
                for v in value.split(","):
                    if v in parts:
                        parts.remove(v)
            out[name] = ",".join(parts)
        else:
            raise RequestError(f"Unknown operations type {op}")
    return out


# ------------------------------------------------------------------------------------------
# DescribeConfigs.


@dataclass(frozen=True)
class Described:
    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    read_only: bool
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]
    doc: str | None
    sensitive: bool = False

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT


def describe_topic(overrides: Mapping[str, str], values: Mapping[str, object], layers: BrokerLayers,
                   *, include_synonyms: bool = True, include_docs: bool = False) -> list[Described]:
    """Kafka's ConfigHelper.createTopicConfigEntry for every (non-internal) topic config, sorted
    by name: the source is the first synonym's (the topic override, then the broker's layers
    under the topic config's broker name)."""
    out = []
    for name in sorted(TOPIC_CONFIGS):
        c = TOPIC_CONFIGS[name]
        if c.internal:
            continue
        value = to_wire(values[name], c.type)
        syns = []
        if name in overrides:
            syns.append((name, value, ConfigSource.TOPIC))
        primary = PRIMARY_SYNONYM.get(name)
        if primary is not None:
            syns.extend(layers.synonyms(primary))
        source = syns[0][2] if syns else ConfigSource.DEFAULT
        out.append(Described(name, value, source, c.type, False, tuple(syns) if include_synonyms else (),
                             c.doc if include_docs else None))
    return out


def describe_broker(values: Mapping[str, str | None], layers: BrokerLayers, *, per_broker: bool,
                    include_synonyms: bool = True, include_docs: bool = False) -> list[Described]:
    """Kafka's ConfigHelper.createBrokerConfigEntry. ``values``: name -> value in force. For the
    cluster-default resource (``per_broker=False``) only synonyms from the dynamic default layer
    count, as in Kafka."""
    out = []
    for name in sorted(values):
        d = BROKER_CONFIGS.get(name)
        syns = layers.synonyms(name)
        if not per_broker:
            syns = [s for s in syns if s[2] == ConfigSource.DYNAMIC_DEFAULT_BROKER]
        source = syns[0][2] if syns else ConfigSource.DEFAULT
        sensitive = d is not None and d.type == ConfigType.PASSWORD
        if sensitive:  # Kafka reports a password's source, never its value
            syns = [(n, None, s) for n, _, s in syns]
        out.append(Described(name, None if sensitive else values[name], source, d.type if d else ConfigType.UNKNOWN,
                             d is None or d.dynamic is None, tuple(syns) if include_synonyms else (),
                             (d.doc if d else None) if include_docs else None, sensitive))
    return out
