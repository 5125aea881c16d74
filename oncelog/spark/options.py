"""The connector's options, validated into frozen objects before any I/O (sans-IO).

Names and meanings follow Spark's Kafka connector (``subscribe``, ``startingOffsets``,
``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``kafka.*`` passed to the client, ...), plus the
options that exist only here (``deliveryGuarantee``, ``transactionalIdPrefix``, ``atomicity``,
``commitLogTopic``, ``txnAppId``/``txnVersion``). Spark hands options over lower-cased, all as
strings; every error names the option and what was wrong with it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Mapping

from .faults import TEST_OPTION_PREFIX, test_options
from .kafka_configs import KafkaConfigError
from .kafka_configs import check as check_kafka_config

DEFAULT_COMMIT_LOG_TOPIC = "oncelog-spark-commits"
DEFAULT_TRANSACTION_TIMEOUT_MS = 300_000
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000

# Spark hands these to every data source; they are not connector options.
_SPARK_OPTIONS = {"path", "checkpointlocation", "queryname"}

# Every option the source understands (lower-case, as Spark hands them over): Spark's Kafka
# source's options, all implemented. Spark ignores an option it does not know; a misspelt
# ``endingTimestmap`` would then read everything, so an unknown option is refused instead.
SOURCE_OPTION_NAMES = (
    "assign", "subscribe", "subscribePattern",
    "startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp",
    "failOnDataLoss", "includeHeaders", "minPartitions", "maxRecordsPerPartition",
    "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    "fetchOffset.numRetries", "fetchOffset.retryIntervalMs", "kafkaConsumer.pollTimeoutMs",
)
# Spark's Kafka source options that have no meaning here: refused with the reason, not ignored.
_REFUSED_SOURCE_OPTIONS = {
    "groupidprefix": "option groupIdPrefix is not supported: the source joins no consumer group (it assigns "
                     "partitions itself and keeps its offsets in Spark's checkpoint), so there is no group id to "
                     "prefix and no group ACL to grant; remove the option",
}
SINK_OPTION_NAMES = (
    "topic", "deliveryGuarantee", "atomicity", "transactionalIdPrefix", "transaction.timeout.ms",
    "commitLogTopic", "txnAppId", "txnVersion",
)

# Kafka's producer compression.type values, and the codec ids of a record batch's attributes.
COMPRESSION_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# KIP-390's compression.<codec>.level bounds (Kafka's GzipCompression, Lz4Compression, ZstdCompression).
_COMPRESSION_LEVELS = {"gzip": (1, 9), "lz4": (1, 17), "zstd": (-131072, 22)}


class OptionError(ValueError):
    """An option is missing, unknown in combination, or has a bad value."""


def _get(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    value = options.get(name.lower())
    return default if value is None else str(value)


def _int(options: Mapping[str, str], name: str, default: int | None = None, *, minimum: int | None = None) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option {name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise OptionError(f"option {name}={value} must be at least {minimum}")
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name}={raw!r} must be true or false")


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h)?\s*$", re.IGNORECASE)


def _duration_ms(options: Mapping[str, str], name: str, default: int) -> int:
    raw = _get(options, name)
    if raw is None:
        return default
    m = _DURATION.match(raw)
    if not m:
        raise OptionError(f"option {name}={raw!r} is not a duration (e.g. 500ms, 30s, 5m)")
    unit = (m.group(2) or "ms").lower()
    return int(m.group(1)) * {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}[unit]


def check_known(options: Mapping[str, str], names, what: str) -> None:
    """Refuse options that are not ``kafka.*``, not Spark's own, and not in ``names``."""
    known = {n.lower() for n in names} | _SPARK_OPTIONS
    unknown = sorted(k for k in options if not k.startswith(("kafka.", TEST_OPTION_PREFIX)) and k.lower() not in known)
    if unknown:
        raise OptionError(f"unknown {what} option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} (options are "
                          f"case-insensitive; the {what} accepts {', '.join(names)}, and kafka.* for the client)")


def clean(validate, options: Mapping[str, str], **kwargs):
    """``validate(options)``, an OptionError raised from here: PySpark prints the traceback of
    a data source's error, and the user needs the message, not the validator's frames."""
    try:
        return validate(options, **kwargs)
    except OptionError as exc:
        error = OptionError(str(exc))
    raise error


def kafka_config(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options with the prefix removed (keys lower-case, as Spark hands them)."""
    return {k[len("kafka."):]: str(v) for k, v in options.items() if k.startswith("kafka.")}


def _check_kafka(kconf: Mapping[str, str], role: str) -> None:
    """The kafka.* options against the Kafka client's own definitions (oncelog.spark.kafka_configs)."""
    try:
        check_kafka_config(kconf, role)
    except KafkaConfigError as exc:
        raise OptionError(str(exc)) from None


def bootstrap_servers(options: Mapping[str, str]) -> str:
    servers = _get(options, "kafka.bootstrap.servers")
    if not servers:
        raise OptionError("option kafka.bootstrap.servers is required (e.g. 127.0.0.1:9092)")
    return servers


# ---------------------------------------------------------------------------------------------
# Source


@dataclass(frozen=True)
class OffsetSpec:
    """startingOffsets / endingOffsets: ``kind`` is earliest | latest | json | timestamp
    (``timestamp`` set: startingTimestamp/endingTimestamp for every partition; else
    ``per_partition``: startingOffsetsByTimestamp/endingOffsetsByTimestamp)."""

    kind: str
    per_partition: dict[str, dict[str, int]] = field(default_factory=dict)  # json/timestamp specs
    timestamp: int | None = None  # global startingTimestamp


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    kafka: dict[str, str]
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: dict[str, tuple[int, ...]] | None = None
    starting: OffsetSpec = OffsetSpec("latest")
    ending: OffsetSpec = OffsetSpec("latest")
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    fail_on_data_loss: bool = True
    include_headers: bool = False
    isolation_level: int = 1  # read_committed unless kafka.isolation.level says otherwise
    poll_timeout_ms: int = 120_000
    partition_max_bytes: int = 8 * 1024 * 1024
    # startingOffsetsByTimestampStrategy: what a starting timestamp after a partition's last
    # record means: "error" (Spark's default) fails the query, "latest" starts at the end.
    starting_timestamp_strategy: str = "error"
    min_partitions: int | None = None  # split large ranges into about this many read tasks
    max_records_per_partition: int | None = None  # split ranges larger than this
    fetch_offset_num_retries: int = 3  # attempts of a driver offset look-up (Spark's default)
    fetch_offset_retry_interval_ms: int = 1000

    def matches(self, topic: str) -> bool:
        if self.subscribe:
            return topic in self.subscribe
        if self.subscribe_pattern is not None:
            return re.fullmatch(self.subscribe_pattern, topic) is not None
        return topic in (self.assign or {})


def _offset_spec(options: Mapping[str, str], name: str, default: str, *, batch_end: bool = False,
                 batch_start: bool = False) -> OffsetSpec:
    raw = _get(options, name, default).strip()
    low = raw.lower()
    if low in ("earliest", "latest"):
        if batch_end and low == "earliest":
            raise OptionError(f"option {name}=earliest is not allowed for a batch query's end")
        return OffsetSpec(low)
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        raise OptionError(f"option {name}={raw!r} must be earliest, latest or JSON like "
                          '{"topic":{"0":23,"1":-2}}') from None
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise OptionError(f'option {name} must be a JSON object of topics to {{"partition": offset}}')
    spec: dict[str, dict[str, int]] = {}
    for topic, parts in parsed.items():
        spec[topic] = {}
        for p, off in parts.items():
            if not str(p).lstrip("-").isdigit() or not isinstance(off, int) or isinstance(off, bool):
                raise OptionError(f"option {name}: partition {p!r} of topic {topic!r} must map to an integer offset")
            # As Spark's Kafka source: a batch may not start at latest (-1) nor end at earliest (-2).
            if batch_start and off == -1:
                raise OptionError(f"option {name}: -1 (latest) for {topic}-{p} is not allowed for a batch query's start")
            if batch_end and off == -2:
                raise OptionError(f"option {name}: -2 (earliest) for {topic}-{p} is not allowed for a batch query's end")
            spec[topic][str(int(p))] = off
    return OffsetSpec("json", spec)


def _position_spec(options: Mapping[str, str], *, edge: str, default: str, batch: bool | None) -> OffsetSpec:
    """startingX or endingX: ``<edge>Offsets``, ``<edge>Timestamp``, ``<edge>OffsetsByTimestamp``
    (at most one). ``batch`` None: a check at load time, when Spark does not say whether the
    query is batch or streaming (mode-specific rules wait for the reader)."""
    names = [f"{edge}Offsets", f"{edge}Timestamp", f"{edge}OffsetsByTimestamp"]
    given = [n for n in names if _get(options, n) is not None]
    if len(given) > 1:
        raise OptionError(f"options {' and '.join(given)} cannot be used together")
    starting = edge == "starting"
    if _get(options, f"{edge}Timestamp") is not None:
        raw = _get(options, f"{edge}Timestamp").strip()
        if not raw.lstrip("-").isdigit():
            raise OptionError(f"option {edge}Timestamp={raw!r} must be a timestamp in milliseconds (a long)")
        return OffsetSpec("timestamp", timestamp=_int(options, f"{edge}Timestamp", minimum=0))
    if _get(options, f"{edge}OffsetsByTimestamp") is not None:
        if _get(options, f"{edge}OffsetsByTimestamp").strip().lower() in ("earliest", "latest"):
            raise OptionError(f"option {edge}OffsetsByTimestamp must be JSON of timestamps in milliseconds like "
                              '{"topic":{"0":1700000000000}}')
        spec = _offset_spec(options, f"{edge}OffsetsByTimestamp", "{}")
        for topic, parts in spec.per_partition.items():
            for p, ts in parts.items():
                if ts < 0:
                    raise OptionError(f"option {edge}OffsetsByTimestamp: {topic}-{p} has a negative timestamp {ts}")
        return OffsetSpec("timestamp", spec.per_partition)
    spec = _offset_spec(options, f"{edge}Offsets", default, batch_start=starting and batch is True,
                        batch_end=not starting and batch is not False)
    if starting and batch and spec.kind == "latest":
        raise OptionError("option startingOffsets=latest is not allowed for a batch query")
    return spec


SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
          "timestampType int")  # the source's rows: Spark's Kafka source's schema
SCHEMA_WITH_HEADERS = SCHEMA + ", headers array<struct<key: string, value: binary>>"  # includeHeaders=true


def source_schema(options) -> str:
    """``DataSource.schema()``: called by ``load()`` (spark.read and spark.readStream alike, so
    the rules of one mode wait for the reader): option errors surface at ``load()``, as with
    Spark's Kafka source, not at ``start()`` or the first action."""
    return SCHEMA_WITH_HEADERS if clean(source_options, options, batch=None).include_headers else SCHEMA


def source_options(options: Mapping[str, str], *, batch: bool | None = False) -> SourceOptions:
    """Validate a source's options (``batch`` for ``spark.read``; None at load time, when the
    mode is not known yet: everything but the mode-specific rules is checked)."""
    for name, reason in _REFUSED_SOURCE_OPTIONS.items():
        if name in {k.lower() for k in options}:
            raise OptionError(reason)
    check_known(options, SOURCE_OPTION_NAMES, "source")
    bootstrap = bootstrap_servers(options)
    strategies = [n for n in ("subscribe", "subscribePattern", "assign") if _get(options, n) is not None]
    if len(strategies) != 1:
        raise OptionError("exactly one of the options subscribe, subscribePattern, assign must be set "
                          f"(got {', '.join(strategies) or 'none'})")
    subscribe: tuple[str, ...] = ()
    pattern = None
    assign = None
    if strategies[0] == "subscribe":
        subscribe = tuple(t.strip() for t in _get(options, "subscribe").split(",") if t.strip())
        if not subscribe:
            raise OptionError("option subscribe names no topic")
    elif strategies[0] == "subscribePattern":
        pattern = _get(options, "subscribePattern")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"option subscribePattern={pattern!r} is not a valid regular expression: {exc}") from None
    else:
        raw = _get(options, "assign")
        try:
            parsed = json.loads(raw)
            assign = {t: tuple(sorted(int(p) for p in ps)) for t, ps in parsed.items()}
        except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
            raise OptionError(f'option assign={raw!r} must be JSON like {{"topicA":[0,1],"topicB":[2,4]}}') from None
    starting = _position_spec(options, edge="starting", default="earliest" if batch else "latest", batch=batch)
    ending_given = [n for n in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp") if _get(options, n) is not None]
    if ending_given and batch is False:
        raise OptionError(f"option {ending_given[0]} is for batch queries (spark.read) only: a streaming query has no end")
    ending = _position_spec(options, edge="ending", default="latest", batch=batch)
    if starting.kind == "timestamp" and ending.kind == "timestamp" and starting.timestamp is None \
            and ending.timestamp is None:
        # As Spark's checkOffsetLimitValidity: the same partitions, each starting no later than it ends.
        s_keys = {(t, p) for t, ps in starting.per_partition.items() for p in ps}
        e_keys = {(t, p) for t, ps in ending.per_partition.items() for p in ps}
        if s_keys != e_keys:
            raise OptionError("options startingOffsetsByTimestamp and endingOffsetsByTimestamp must name the same "
                              f"partitions (only in one: {', '.join(f'{t}-{p}' for t, p in sorted(s_keys ^ e_keys))})")
        for t, p in sorted(s_keys):
            if starting.per_partition[t][p] > ending.per_partition[t][p]:
                raise OptionError(f"options startingOffsetsByTimestamp/endingOffsetsByTimestamp: {t}-{p} starts at "
                                  f"{starting.per_partition[t][p]}, after its end {ending.per_partition[t][p]}")
    strategy = _get(options, "startingOffsetsByTimestampStrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"option startingOffsetsByTimestampStrategy={strategy!r} must be error (fail when no record "
                          "is at or after the starting timestamp) or latest (start at the end then)")
    kconf = kafka_config(options)
    for forbidden in ("group.id", "auto.offset.reset", "enable.auto.commit", "key.deserializer",
                      "value.deserializer", "interceptor.classes"):
        if forbidden in kconf:
            raise OptionError(f"option kafka.{forbidden} is not supported: the source manages offsets itself "
                              "(use startingOffsets)")
    _check_kafka(kconf, "source")
    isolation = kconf.get("isolation.level", "read_committed").lower()
    if isolation not in ("read_committed", "read_uncommitted"):
        raise OptionError(f"option kafka.isolation.level={isolation!r} must be read_committed or read_uncommitted")
    max_per = _int(options, "maxOffsetsPerTrigger", minimum=1)
    min_per = _int(options, "minOffsetsPerTrigger", minimum=1)
    if max_per is not None and min_per is not None and min_per > max_per:
        raise OptionError(f"option minOffsetsPerTrigger={min_per} is larger than maxOffsetsPerTrigger={max_per}")
    return SourceOptions(
        bootstrap=bootstrap, kafka=kconf, subscribe=subscribe, subscribe_pattern=pattern, assign=assign,
        starting=starting, ending=ending, max_offsets_per_trigger=max_per, min_offsets_per_trigger=min_per,
        max_trigger_delay_ms=_duration_ms(options, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        isolation_level=1 if isolation == "read_committed" else 0,
        poll_timeout_ms=_int(options, "kafkaConsumer.pollTimeoutMs", 120_000, minimum=1),
        partition_max_bytes=_int(options, "kafka.max.partition.fetch.bytes", 8 * 1024 * 1024, minimum=1),
        starting_timestamp_strategy=strategy,
        min_partitions=_int(options, "minPartitions", minimum=1),
        max_records_per_partition=_int(options, "maxRecordsPerPartition", minimum=1),
        fetch_offset_num_retries=_int(options, "fetchOffset.numRetries", 3, minimum=1),
        fetch_offset_retry_interval_ms=_int(options, "fetchOffset.retryIntervalMs", 1000, minimum=0),
    )


# ---------------------------------------------------------------------------------------------
# Sink


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    kafka: dict[str, str]
    topic: str | None
    delivery_guarantee: str  # "exactly-once" | "at-least-once"
    atomicity: str  # "batch" | "partition": the SinkMode (oncelog.spark.modes)
    transactional_id_prefix: str | None  # None: derived from the query id
    transaction_timeout_ms: int
    commit_log_topic: str
    max_batch_bytes: int
    checkpoint_location: str | None
    txn_app_id: str | None = None  # batch writes from foreachBatch: Delta's idempotent-write names
    txn_version: int | None = None
    compression: int = 0  # kafka.compression.type as a record batch codec id (0: none)
    compression_level: int | None = None  # kafka.compression.<codec>.level (None: the codec's default)
    test_hooks: tuple[tuple[str, str], ...] = ()  # the test options, read by oncelog.spark.faults only

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == "exactly-once"


def _compression(kconf: Mapping[str, str]) -> tuple[int, int | None]:
    """kafka.compression.type (Kafka's producer values) and its kafka.compression.<codec>.level."""
    name = kconf.get("compression.type", "none").strip().lower()
    if name not in COMPRESSION_CODECS:
        raise OptionError(f"option kafka.compression.type={name!r} must be one of {', '.join(COMPRESSION_CODECS)}")
    level = None
    for codec, (low, high) in _COMPRESSION_LEVELS.items():
        raw = kconf.get(f"compression.{codec}.level")
        if raw is None:
            continue
        try:
            value = int(raw)
        except ValueError:
            raise OptionError(f"option kafka.compression.{codec}.level={raw!r} is not an integer") from None
        if not low <= value <= high:
            raise OptionError(f"option kafka.compression.{codec}.level={value} must be between {low} and {high}")
        if codec == name:
            level = value
    return COMPRESSION_CODECS[name], level


def sink_options(options: Mapping[str, str], *, batch: bool = False) -> SinkOptions:
    check_known(options, SINK_OPTION_NAMES, "sink")
    bootstrap = bootstrap_servers(options)
    guarantee = _get(options, "deliveryGuarantee", "exactly-once").lower().replace("_", "-")
    if guarantee not in ("exactly-once", "at-least-once"):
        raise OptionError(f"option deliveryGuarantee={guarantee!r} must be exactly-once or at-least-once")
    atomicity = _get(options, "atomicity", "batch").lower()
    if atomicity not in ("batch", "partition"):
        raise OptionError(f"option atomicity={atomicity!r} must be batch (a micro-batch commits as a whole, "
                          "decided by the driver) or partition (each write task commits its own transaction)")
    if atomicity == "partition" and guarantee != "exactly-once":
        raise OptionError("option atomicity=partition is a mode of deliveryGuarantee=exactly-once "
                          "(at-least-once writes have no transactions to scope)")
    if atomicity == "partition" and batch:
        raise OptionError("option atomicity=partition is for streaming writes (writeStream): its progress "
                          "markers are keyed by micro-batch id; a batch write (df.write) uses atomicity=batch")
    kconf = kafka_config(options)
    for forbidden in ("transactional.id", "key.serializer", "value.serializer", "enable.idempotence"):
        if forbidden in kconf:
            raise OptionError(f"option kafka.{forbidden} is not supported: the sink manages it (see "
                              "deliveryGuarantee and transactionalIdPrefix)")
    _check_kafka(kconf, "sink")
    timeout = _int(options, "transaction.timeout.ms", None, minimum=1000)
    if timeout is None:
        timeout = int(kconf.get("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS))
    app_id = _get(options, "txnAppId")
    version = _int(options, "txnVersion", minimum=0)
    if (app_id is None) != (version is None):
        raise OptionError("options txnAppId and txnVersion must be given together")
    if batch and guarantee == "exactly-once" and app_id is None:
        raise OptionError("a batch write (df.write) with deliveryGuarantee=exactly-once needs txnAppId and "
                          "txnVersion (e.g. the query name and the batchId inside foreachBatch); use "
                          "deliveryGuarantee=at-least-once for a plain batch write")
    compression, compression_level = _compression(kconf)
    prefix = _get(options, "transactionalIdPrefix")
    if prefix is not None and not re.fullmatch(r"[A-Za-z0-9._-]+", prefix):
        raise OptionError(f"option transactionalIdPrefix={prefix!r} may hold only letters, digits, '.', '_', '-'")
    return SinkOptions(
        bootstrap=bootstrap, kafka=kconf, topic=_get(options, "topic"), delivery_guarantee=guarantee,
        atomicity=atomicity, transactional_id_prefix=prefix if prefix is not None else
        (f"oncelog-{app_id}" if app_id is not None else None),
        transaction_timeout_ms=timeout,
        commit_log_topic=_get(options, "commitLogTopic", DEFAULT_COMMIT_LOG_TOPIC),
        max_batch_bytes=int(kconf.get("batch.size", kconf.get("max.request.size", 1_000_000))),
        checkpoint_location=_get(options, "checkpointLocation"),
        txn_app_id=app_id, txn_version=version,
        compression=compression, compression_level=compression_level,
        test_hooks=test_options(options),
    )
