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

DEFAULT_COMMIT_LOG_TOPIC = "oncelog-spark-commits"
DEFAULT_TRANSACTION_TIMEOUT_MS = 300_000
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000

# Spark hands these to every data source; they are not connector options.
_SPARK_OPTIONS = {"path", "checkpointlocation", "queryname"}


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


def kafka_config(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options with the prefix removed (keys lower-case, as Spark hands them)."""
    return {k[len("kafka."):]: str(v) for k, v in options.items() if k.startswith("kafka.")}


def bootstrap_servers(options: Mapping[str, str]) -> str:
    servers = _get(options, "kafka.bootstrap.servers")
    if not servers:
        raise OptionError("option kafka.bootstrap.servers is required (e.g. 127.0.0.1:9092)")
    return servers


# ---------------------------------------------------------------------------------------------
# Source


@dataclass(frozen=True)
class OffsetSpec:
    """startingOffsets / endingOffsets: ``kind`` is earliest | latest | json | timestamp."""

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


def source_options(options: Mapping[str, str], *, batch: bool = False) -> SourceOptions:
    """Validate a source's options (``batch`` for ``spark.read``)."""
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
    conflicting = [n for n in ("startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp")
                   if _get(options, n) is not None]
    if len(conflicting) > 1:
        raise OptionError(f"options {' and '.join(conflicting)} cannot be used together")
    if _get(options, "startingTimestamp") is not None:
        starting = OffsetSpec("timestamp", timestamp=_int(options, "startingTimestamp", minimum=0))
    elif _get(options, "startingOffsetsByTimestamp") is not None:
        spec = _offset_spec(options, "startingOffsetsByTimestamp", "{}")
        starting = OffsetSpec("timestamp", spec.per_partition)
    else:
        starting = _offset_spec(options, "startingOffsets", "earliest" if batch else "latest", batch_start=batch)
        if batch and starting.kind == "latest":
            raise OptionError("option startingOffsets=latest is not allowed for a batch query")
    ending = OffsetSpec("latest")
    if _get(options, "endingOffsets") is not None:
        if not batch:
            raise OptionError("option endingOffsets is for batch queries (spark.read) only")
        ending = _offset_spec(options, "endingOffsets", "latest", batch_end=True)
    kconf = kafka_config(options)
    for forbidden in ("group.id", "auto.offset.reset", "enable.auto.commit", "key.deserializer",
                      "value.deserializer"):
        if forbidden in kconf:
            raise OptionError(f"option kafka.{forbidden} is not supported: the source manages offsets itself "
                              "(use startingOffsets)")
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
    )


# ---------------------------------------------------------------------------------------------
# Sink


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    kafka: dict[str, str]
    topic: str | None
    delivery_guarantee: str  # "exactly-once" | "at-least-once"
    atomicity: str  # "batch" | "partition" (see oncelog.spark.partition)
    transactional_id_prefix: str | None  # None: derived from the query id
    transaction_timeout_ms: int
    commit_log_topic: str
    max_batch_bytes: int
    checkpoint_location: str | None
    txn_app_id: str | None = None  # batch writes from foreachBatch: Delta's idempotent-write names
    txn_version: int | None = None
    # Test hooks (options "oncelog.test.*"; options reach the commit runner, environment
    # variables set after the JVM started do not): "barrier"="false" turns the visibility
    # barrier off; "commitStaggerMs" spaces the EndTxns of a batch so a reader can look
    # between them (tests/spark/test_sink_atomicity.py).
    test_hooks: tuple[tuple[str, str], ...] = ()

    def hook(self, name: str, default: str = "") -> str:
        return dict(self.test_hooks).get(name, default)

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == "exactly-once"


def sink_options(options: Mapping[str, str], *, batch: bool = False) -> SinkOptions:
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
        test_hooks=tuple(sorted((k[len("oncelog.test."):], str(v)) for k, v in options.items()
                                if k.startswith("oncelog.test."))),
    )
