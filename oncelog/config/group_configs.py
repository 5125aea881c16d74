"""Kafka 4.x's GROUP config resource (ConfigResource type 32): a group's own settings, set with
IncrementalAlterConfigs / AlterConfigs and read with DescribeConfigs — pure, no I/O (the store is
:class:`oncelog.metadata.configs.GroupConfigs`).

What this module knows (Apache Kafka 4.4's ``GroupConfig``, read with ``javap -c -constants`` and
checked against a running Kafka 4.4):

* :data:`GROUP_CONFIGS`: every group config in Kafka's definition order (the order in which its
  ``ConfigDef.parse`` reports the first bad value), with type, default, validator, documentation,
  whether it is internal (Kafka's ``defineInternal``: described only once set) and its broker
  synonym (``consumer.session.timeout.ms`` -> ``group.consumer.session.timeout.ms``).

* What oncelog does with them. ``consumer.session.timeout.ms``, ``consumer.heartbeat.interval.ms``
  and ``consumer.assignment.interval.ms`` are honoured: the consumer coordinator reads them through
  :func:`consumer_settings` at every use, so a change applies to the group at once.
  ``consumer.assignor.offload.enable`` has no effect, as the broker-level one (oncelog's assignors
  run in the coordinator). The ``share.*`` configs that :func:`share_settings` lists configure
  share groups: their defaults and bounds are the broker's ``group.share.*`` settings
  (:class:`~.settings.GroupConfig`). ``share.assignment.interval.ms``, the ``streams.*`` and
  ``errors.deadletterqueue.*`` configs are accepted, validated and described exactly as Kafka
  does; their bounds are Kafka's broker defaults (group.share.assignment.interval.ms,
  group.streams.*: :data:`KAFKA_BROKER_DEFAULTS`, which oncelog has no settings for).

* Validation with Kafka's order and messages (:func:`validate`, GroupConfig.validate): unknown
  names, duplicate rack tags, then each value parsed (ConfigDef), then the broker's min/max
  bounds (heartbeat, session, assignment interval, ...), then session > heartbeat (each side the
  group's value or the broker's). All are INVALID_CONFIG (:class:`~.registry.ConfigError`).

* :func:`describe`: DescribeConfigs of a group, Kafka 4.4's ConfigHelper.createGroupConfigEntry:
  every non-internal config (and the internal ones that are set), its value (the group's, else
  the broker's synonym's, else the config's default), source GROUP_CONFIG (8) when set, else the
  synonym's source, and synonyms: the group's value (GROUP_CONFIG) when set, then the broker
  synonym in every layer that has it, highest first (STATIC_BROKER_CONFIG, DEFAULT_CONFIG; or the
  config itself as DEFAULT_CONFIG when it has no broker synonym).
  Entries come in the order Kafka 4.4 sends them (its hash map's, measured).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from .registry import (ConfigError, ConfigSource, ConfigType, Described, Validator, at_least, one_of, parse_value,
                       to_wire)
from .settings import GroupConfig

GROUP_CONFIG_SOURCE = 8  # DescribeConfigs' GROUP_CONFIG (KIP-848): not in registry.ConfigSource's broker/topic set

T = ConfigType

_AUTO_OFFSET_RESET_MESSAGE = ("Invalid value `{value}` for configuration share.auto.offset.reset. The value must be "
                              "either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")
# java.time.Duration.parse (PnDTnHnMn.nS, case-insensitive); Kafka refuses a negative duration.
_DURATION = re.compile(r"P(?:[0-9]+D)?(?:T(?:[0-9]+H)?(?:[0-9]+M)?(?:[0-9]+(?:[.,][0-9]{0,9})?S)?)?", re.IGNORECASE)


def _auto_offset_reset(name, value):
    """ShareGroupAutoOffsetResetStrategy's validator: earliest, latest or by_duration:<ISO-8601>."""
    ok = value in ("earliest", "latest")
    if not ok and value.startswith("by_duration:"):
        text = value[len("by_duration:"):]
        ok = bool(_DURATION.fullmatch(text)) and text.upper() not in ("P", "PT") and not text.upper().endswith("T")
    if not ok:
        raise ConfigError(f"Invalid value {value} for configuration {name}: "
                          + _AUTO_OFFSET_RESET_MESSAGE.format(value=value))


_auto_offset_reset.describe = "[earliest, latest, by_duration:PnDTnHnMn.nS]"


@dataclass(frozen=True)
class GroupConfigDef:
    """One group config: Kafka's name, type, default (None: the broker synonym's value, as
    ``streams.assignor.name``), validator, documentation; ``synonym`` the broker config whose
    value a group without its own takes (None: the config's own default); ``internal``: Kafka's
    defineInternal, described only when set; ``honoured``: oncelog's coordinator uses it."""

    name: str
    type: ConfigType
    default: str | None
    validator: Validator | None
    doc: str
    synonym: str | None
    internal: bool = False
    honoured: bool = False


def _c(name, ctype, default, validator, doc, synonym="", internal=False, honoured=False) -> GroupConfigDef:
    return GroupConfigDef(name, ctype, default, validator, doc,
                          None if synonym is None else (synonym or "group." + name), internal, honoured)


_LIST = [
    _c("consumer.session.timeout.ms", T.INT, "45000", at_least(1),
       "The timeout to detect client failures when using the consumer group protocol.", honoured=True),
    _c("consumer.heartbeat.interval.ms", T.INT, "5000", at_least(1),
       "The heartbeat interval given to the members of a consumer group.", honoured=True),
    _c("consumer.assignment.interval.ms", T.INT, "1000", at_least(0),
       "The interval between assignment updates for a consumer group.", honoured=True),
    _c("consumer.assignor.offload.enable", T.BOOLEAN, "true", None,
       "Whether to offload consumer group assignment to a group coordinator background thread.", internal=True),
    _c("share.session.timeout.ms", T.INT, "45000", at_least(1),
       "The timeout to detect client failures when using the share group protocol."),
    _c("share.heartbeat.interval.ms", T.INT, "5000", at_least(1),
       "The heartbeat interval given to the members of a share group."),
    _c("share.record.lock.duration.ms", T.INT, "30000", at_least(1000),
       "The record acquisition lock duration in milliseconds for share groups."),
    _c("share.delivery.count.limit", T.INT, "5", at_least(2),
       "The maximum number of delivery attempts for a record delivered to a share group."),
    _c("share.partition.max.record.locks", T.INT, "2000", at_least(100),
       "Share-group record lock limit per share-partition."),
    _c("share.auto.offset.reset", T.STRING, "latest", _auto_offset_reset,
       "The strategy to initialize the share-partition start offset. <ul><li>earliest: automatically reset the "
       "offset to the earliest offset</li><li>latest: automatically reset the offset to the latest offset</li>"
       "<li>by_duration:&lt;duration&gt;: automatically reset the offset to a configured duration from the current "
       "timestamp. &lt;duration&gt; must be specified in ISO8601 format (PnDTnHnMn.nS). Negative duration is not "
       "allowed.</li><li>anything else: throw exception to the share consumer.</li></ul>", synonym=None),
    _c("share.isolation.level", T.STRING, "read_uncommitted", one_of("read_committed", "read_uncommitted"),
       "Controls how to read records written transactionally. If set to \"read_committed\", the share group will "
       "only deliver transactional records which have been committed. If set to \"read_uncommitted\", the share "
       "group will return all messages, even transactional messages which have been aborted. Non-transactional "
       "records will be returned unconditionally in either mode.", synonym=None),
    _c("share.renew.acknowledge.enable", T.BOOLEAN, "true", None,
       "Whether the renew acknowledge type is enabled for the share group.", synonym=None),
    _c("share.assignment.interval.ms", T.INT, "1000", at_least(0),
       "The interval between assignment updates for a share group."),
    _c("share.assignor.offload.enable", T.BOOLEAN, "true", None,
       "Whether to offload share group assignment to a group coordinator background thread.", internal=True),
    _c("streams.session.timeout.ms", T.INT, "45000", at_least(1),
       "The timeout to detect client failures when using the streams group protocol."),
    _c("streams.heartbeat.interval.ms", T.INT, "5000", at_least(1), "The heartbeat interval given to the members."),
    _c("streams.num.standby.replicas", T.INT, "0", at_least(0), "The number of standby replicas for each task."),
    _c("streams.initial.rebalance.delay.ms", T.INT, "3000", at_least(0),
       "The amount of time the group coordinator will wait for more streams clients to join a new group before "
       "performing the first rebalance. A longer delay means potentially fewer rebalances."),
    _c("streams.assignment.interval.ms", T.INT, "1000", at_least(0),
       "The interval between assignment updates for a streams group."),
    _c("streams.assignor.offload.enable", T.BOOLEAN, "true", None,
       "Whether to offload streams group assignment to a group coordinator background thread.", internal=True),
    _c("streams.task.offset.interval.ms", T.INT, "60000", at_least(1),
       "The interval in which the warmup task changelog offsets on a client are updated on the broker. The offsets "
       "are sent with the next heartbeat after this time has passed.", internal=True),
    _c("streams.num.warmup.replicas", T.INT, "2", at_least(0), "The maximum number of warmup task replicas.",
       internal=True),
    _c("streams.rack.aware.assignment.tags", T.LIST, "", None,
       "List of client tag keys used to distribute standby replicas across Kafka Streams instances. When "
       "configured, and the used broker-side assignor supports it, it will make a best-effort to distribute "
       "standby tasks over each client tag dimension."),
    _c("streams.acceptable.recovery.lag", T.LONG, "10000", at_least(0),
       "The maximum acceptable lag (number of offsets to catch up) for a client to be considered caught-up enough "
       "to receive an active task assignment.", internal=True),
    _c("streams.assignor.name", T.STRING, None, None,
       "The task assignor to use for this streams group, selected by short name from the assignors registered via "
       "the broker configuration group.streams.assignors. When unset, the group defaults to the first assignor "
       "configured in the broker's group.streams.assignors setting. Changing the assignor does not trigger a "
       "rebalance for the group; the new assignor takes effect on the next rebalance.",
       synonym="group.streams.assignors"),
    _c("errors.deadletterqueue.topic.name", T.STRING, "", None,
       "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. If blank (the "
       "default), the group does not have a DLQ topic.", synonym=None),
    _c("errors.deadletterqueue.copy.record.enable", T.BOOLEAN, "false", None,
       "When writing onto the dead-letter queue topic, whether to copy the original record onto the DLQ topic, or "
       "just write a record containing the context information headers.", synonym=None),
]
GROUP_CONFIGS: dict[str, GroupConfigDef] = {c.name: c for c in _LIST}

# The order of Kafka 4.4's DescribeConfigs entries (its ConfigHelper's hash map, measured): the
# internal configs that are set first, then the others.
_DESCRIBE_ORDER = (
    "share.assignor.offload.enable", "streams.num.warmup.replicas", "consumer.assignor.offload.enable",
    "streams.acceptable.recovery.lag", "streams.assignor.offload.enable", "streams.task.offset.interval.ms",
    "consumer.session.timeout.ms", "streams.assignor.name", "consumer.assignment.interval.ms",
    "errors.deadletterqueue.copy.record.enable", "share.auto.offset.reset", "streams.rack.aware.assignment.tags",
    "share.renew.acknowledge.enable", "streams.initial.rebalance.delay.ms", "share.session.timeout.ms",
    "streams.assignment.interval.ms", "share.heartbeat.interval.ms", "streams.heartbeat.interval.ms",
    "share.delivery.count.limit", "errors.deadletterqueue.topic.name", "consumer.heartbeat.interval.ms",
    "share.record.lock.duration.ms", "share.assignment.interval.ms", "share.isolation.level",
    "streams.session.timeout.ms", "share.partition.max.record.locks", "streams.num.standby.replicas")
assert sorted(_DESCRIBE_ORDER) == sorted(GROUP_CONFIGS)

# Kafka 4.4's broker defaults of the share and streams group settings oncelog has no broker config
# for (the group.share.* it has are BrokerConfigDefs: GroupConfig.share_*): the defaults a group
# without its own takes, and the bounds its own must keep.
KAFKA_BROKER_DEFAULTS = {
    "group.share.assignment.interval.ms": "1000", "group.share.assignor.offload.enable": "true",
    "group.streams.session.timeout.ms": "45000", "group.streams.heartbeat.interval.ms": "5000",
    "group.streams.num.standby.replicas": "0", "group.streams.initial.rebalance.delay.ms": "3000",
    "group.streams.assignment.interval.ms": "1000", "group.streams.assignor.offload.enable": "true",
    "group.streams.task.offset.interval.ms": "60000", "group.streams.num.warmup.replicas": "2",
    "group.streams.rack.aware.assignment.tags": "", "group.streams.acceptable.recovery.lag": "10000",
    "group.streams.assignors": "sticky",
}
_STREAMS_ASSIGNORS = ["sticky"]


def _bounds(gc: GroupConfig) -> list[tuple[str, int | None, int | None]]:
    """GroupConfig.validateValues' checks in Kafka's order: (config, min, max); None = unbounded
    (validateIntMax / validateIntMin). The consumer and share ones are this broker's
    group.consumer.min/max.* and group.share.min/max.*."""
    return [
        ("consumer.heartbeat.interval.ms", gc.consumer_min_heartbeat_interval_ms, gc.consumer_max_heartbeat_interval_ms),
        ("consumer.session.timeout.ms", gc.consumer_min_session_timeout_ms, gc.consumer_max_session_timeout_ms),
        ("consumer.assignment.interval.ms", gc.consumer_min_assignment_interval_ms,
         gc.consumer_max_assignment_interval_ms),
        ("share.heartbeat.interval.ms", gc.share_min_heartbeat_interval_ms, gc.share_max_heartbeat_interval_ms),
        ("share.session.timeout.ms", gc.share_min_session_timeout_ms, gc.share_max_session_timeout_ms),
        ("share.record.lock.duration.ms", gc.share_min_record_lock_duration_ms,
         gc.share_max_record_lock_duration_ms),
        ("share.delivery.count.limit", gc.share_min_delivery_count_limit, gc.share_max_delivery_count_limit),
        ("share.partition.max.record.locks", gc.share_min_partition_max_record_locks,
         gc.share_max_partition_max_record_locks),
        ("share.assignment.interval.ms", 0, 15000),
        ("streams.heartbeat.interval.ms", 5000, 15000),
        ("streams.session.timeout.ms", 45000, 60000),
        ("streams.num.standby.replicas", None, 2),
        ("streams.assignment.interval.ms", 0, 15000),
        ("streams.task.offset.interval.ms", 15000, None),
        ("streams.num.warmup.replicas", None, 20),
    ]


def _session_heartbeat_pairs(gc: GroupConfig) -> list[tuple[str, int, str, int]]:
    return [("consumer.session.timeout.ms", gc.consumer_session_timeout_ms,
             "consumer.heartbeat.interval.ms", gc.consumer_heartbeat_interval_ms),
            ("share.session.timeout.ms", gc.share_session_timeout_ms,
             "share.heartbeat.interval.ms", gc.share_heartbeat_interval_ms),
            ("streams.session.timeout.ms", 45000, "streams.heartbeat.interval.ms", 5000)]


def validate(props: Mapping[str, str], gc: GroupConfig) -> dict[str, object]:
    """Kafka's GroupConfig.validate of a group's whole set of configs (after the alter's
    operations): ConfigError (INVALID_CONFIG) with Kafka's message, else the parsed values."""
    for name in props:  # validateNames
        if name not in GROUP_CONFIGS:
            raise ConfigError(f"Unknown group config name: {name}")
    tags = props.get("streams.rack.aware.assignment.tags")
    if tags is not None:  # validateNoDuplicateRackAwareAssignmentTags
        parts = parse_value("streams.rack.aware.assignment.tags", tags, T.LIST)
        if len(set(parts)) != len(parts):
            raise ConfigError("streams.rack.aware.assignment.tags must not contain duplicate tag keys.")
    parsed: dict[str, object] = {}
    for c in _LIST:  # ConfigDef.parse: definition order
        if c.name in props:
            value = parse_value(c.name, props[c.name], c.type)
            if c.validator is not None:
                c.validator(c.name, value)
            parsed[c.name] = value
    for name, lo, hi in _bounds(gc):  # validateValues
        if name not in parsed:
            continue
        v = parsed[name]
        if lo is not None and hi is not None and not lo <= v <= hi:
            raise ConfigError(f"{name} must be in the range {lo} to {hi} inclusive.")
        if lo is None and v > hi:
            raise ConfigError(f"{name} must be less than or equal to {hi}")
        if hi is None and v < lo:
            raise ConfigError(f"{name} must be greater than or equal to {lo}")
    name = parsed.get("streams.assignor.name")
    if name is not None and name not in _STREAMS_ASSIGNORS:
        raise ConfigError(f"streams.assignor.name '{name}' is not a registered task assignor. "
                          f"Registered assignors are: [{', '.join(_STREAMS_ASSIGNORS)}].")
    for session, session_default, heartbeat, heartbeat_default in _session_heartbeat_pairs(gc):
        if session in parsed or heartbeat in parsed:
            if parsed.get(session, session_default) <= parsed.get(heartbeat, heartbeat_default):
                raise ConfigError(f"{session} must be greater than {heartbeat}")
    dlq = parsed.get("errors.deadletterqueue.topic.name")
    if dlq and dlq.startswith("__"):
        raise ConfigError("errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'")
    return parsed


def apply_incremental(current: Mapping[str, str], ops: Iterable[tuple[str, int, str | None]]) -> dict[str, str]:
    """IncrementalAlterConfigs' operations on a group's configs: SET, DELETE (of a name not set,
    or unknown: nothing, as Kafka); APPEND and SUBTRACT are refused for every group config, as
    Kafka's ConfigurationControlManager answers (no group config is splittable)."""
    out = dict(current)
    for name, op, value in ops:
        if op == 0:
            out[name] = value
        elif op == 1:
            out.pop(name, None)
        else:
            raise ConfigError(f"Can't {'APPEND' if op == 2 else 'SUBTRACT'} to key {name} because its type is not LIST.")
    return out


def consumer_settings(props: Mapping[str, str], gc: GroupConfig) -> dict[str, int]:
    """The group's own honoured settings (consumer.session.timeout.ms, ...), as Kafka's
    GroupConfig.evaluate: clamped into the broker's current bounds (a group config set under
    wider bounds than a later start's keeps working, at the nearest bound)."""
    out = {}
    bounds = {name: (lo, hi) for name, lo, hi in _bounds(gc)}
    for c in _LIST:
        if c.honoured and c.name in props:
            try:
                value = parse_value(c.name, props[c.name], c.type)
            except ConfigError:
                continue  # validated when set; a hand-edited file is not trusted
            lo, hi = bounds[c.name]
            out[c.name] = min(max(value, lo), hi)
    return out


# A share group config -> the GroupConfig field of its broker synonym (group.share.*).
SHARE_BROKER_SETTINGS = {
    "share.session.timeout.ms": "share_session_timeout_ms",
    "share.heartbeat.interval.ms": "share_heartbeat_interval_ms",
    "share.record.lock.duration.ms": "share_record_lock_duration_ms",
    "share.delivery.count.limit": "share_delivery_count_limit",
    "share.partition.max.record.locks": "share_partition_max_record_locks"}
SHARE_SETTINGS = ("share.session.timeout.ms", "share.heartbeat.interval.ms", "share.record.lock.duration.ms",
                  "share.delivery.count.limit", "share.partition.max.record.locks", "share.auto.offset.reset",
                  "share.isolation.level", "share.renew.acknowledge.enable")


def share_settings(props: Mapping[str, str], gc: GroupConfig) -> dict[str, object]:
    """Every setting a share group runs by (:data:`SHARE_SETTINGS`): the group's own, clamped into
    the broker's bounds (group.share.min/max.*) as Kafka's GroupConfig.evaluate does, else the
    broker's ``group.share.*`` setting (:data:`SHARE_BROKER_SETTINGS`), else the config's own
    default."""
    bounds = {name: (lo, hi) for name, lo, hi in _bounds(gc)}
    out: dict[str, object] = {}
    for name in SHARE_SETTINGS:
        c = GROUP_CONFIGS[name]
        value = None
        if name in props:
            try:
                value = parse_value(name, props[name], c.type)
            except ConfigError:
                value = None  # validated when set; a hand-edited file is not trusted
        if value is None:
            field = SHARE_BROKER_SETTINGS.get(name)
            value = getattr(gc, field) if field else parse_value(name, c.default, c.type)
        if isinstance(value, int) and not isinstance(value, bool) and name in bounds:
            lo, hi = bounds[name]
            value = max(value, lo) if lo is not None else value
            value = min(value, hi) if hi is not None else value
        out[name] = value
    return out


BrokerSynonyms = Callable[[str], list[tuple[str, str | None, int]]]


def describe(props: Mapping[str, str], broker_synonyms: BrokerSynonyms, *, include_synonyms: bool,
             include_docs: bool) -> list[Described]:
    """DescribeConfigs of a group whose own configs are ``props``. ``broker_synonyms(name)``: a
    broker config (group.consumer.session.timeout.ms, ...) in every layer that has it, highest
    first, as (name, value, source) — Kafka lists them all (a static value, then the default)."""
    out = []
    for name in _DESCRIBE_ORDER:
        c = GROUP_CONFIGS[name]
        if c.internal and name not in props:
            continue
        if c.synonym is not None:
            below = tuple(broker_synonyms(c.synonym))
        else:
            below = ((name, c.default, int(ConfigSource.DEFAULT)),)
        if name in props:
            value = to_wire(parse_value(name, props[name], c.type), c.type)
            synonyms = ((name, value, GROUP_CONFIG_SOURCE),) + below
        else:
            value = below[0][1]
            synonyms = below
        out.append(Described(name=name, value=value, source=synonyms[0][2], type=c.type, read_only=False,
                             synonyms=synonyms if include_synonyms else (), doc=c.doc if include_docs else None))
    return out
