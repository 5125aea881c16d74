"""The connector's ``kafka.*`` options, checked as the Kafka client checks its own configuration
(sans-IO).

Spark's Kafka connector hands ``kafka.*`` to the Java client, which refuses a bad value with a
ConfigException. Ours go to the project's protocol client, which reads only some of them; before
this check a misspelt ``kafka.compresion.type=gzip`` silently wrote uncompressed batches, and
``kafka.fetch.max.wait.ms=abc`` or ``kafka.acks=0`` were taken without effect or a word. Now:

- a name the Kafka client does not know (kafka-clients 4.4's ProducerConfig, ConsumerConfig and
  AdminClientConfig, :data:`TABLE_PATH`, generated from the jar by tests/kafka/kafka_config_table.py)
  and that is not one of the librdkafka security names the client layer also takes
  (:data:`CLIENT_LAYER_NAMES`) is refused, with the closest known name;
- a value is checked as ConfigDef parses and validates it (type: BOOLEAN, INT, SHORT, LONG,
  DOUBLE; validators: ranges and value lists), with Kafka's own wording;
- a configuration that names a Java class (type CLASS, ``*.classes``) is refused: a Python
  client cannot run it, and ignoring a partitioner or an interceptor would change what is written;
- ``acks`` other than ``all``/``-1`` is refused on the sink (idempotence and transactions need
  acks=all, and Kafka's producer refuses the combination too);
- a valid configuration the connector does not read is accepted and reported once per process
  as ignored, with the reason (:func:`ignored_reason`): e.g. ``linger.ms`` (the sink sends each
  task's records at commit) or ``fetch.max.wait.ms`` (the source reads offset ranges the driver
  planned).

:func:`check` is called by :mod:`oncelog.spark.options` with the options' role (``source`` /
``sink``); what each role reads is :data:`HONOURED`.
"""

from __future__ import annotations

import difflib
import functools
import json
import logging
import os
import re
from typing import Mapping

TABLE_CLIENT_VERSION = "4.4.0"
TABLE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafka_client_configs.json")

log = logging.getLogger("oncelog.spark.options")


class KafkaConfigError(ValueError):
    """A ``kafka.*`` option is unknown, has a bad value, or cannot be honoured."""


# Names oncelog.client.security reads that are librdkafka's (confluent-kafka's) or the project's,
# not the Java client's: accepted so one configuration serves both kinds of client.
CLIENT_LAYER_NAMES = frozenset({
    "ssl.ca.location", "ssl.ca.pem", "ssl.certificate.location", "ssl.certificate.pem", "ssl.key.location",
    "ssl.key.pem", "enable.ssl.certificate.verification", "sasl.mechanisms", "sasl.username", "sasl.password",
    "sasl.oauthbearer.config", "sasl.oauthbearer.method", "sasl.oauthbearer.token", "sasl.oauthbearer.token.file",
    "enable.sasl.oauthbearer.unsecure.jwt",
})

# What the client layer reads for every role: oncelog.client.kafka.KafkaClient (client.id,
# request.timeout.ms) and oncelog.client.security (the security settings).
_SECURITY = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.jaas.config", "sasl.oauthbearer.token.endpoint.url",
    "ssl.protocol", "ssl.enabled.protocols", "ssl.cipher.suites", "ssl.endpoint.identification.algorithm",
    "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.certificates", "ssl.truststore.password",
    "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.keystore.password", "ssl.key.password",
}) | CLIENT_LAYER_NAMES
_COMMON = frozenset({"bootstrap.servers", "client.id", "request.timeout.ms"}) | _SECURITY
HONOURED = {
    "source": _COMMON | {"isolation.level", "max.partition.fetch.bytes"},
    "sink": _COMMON | {"acks", "compression.type", "compression.gzip.level", "compression.lz4.level",
                       "compression.zstd.level", "transaction.timeout.ms", "batch.size", "max.request.size",
                       "delivery.timeout.ms"},
}

# Why a valid configuration has no effect, for the ones users bring most often.
_REASONS = {
    "linger.ms": "the sink sends each task's records when the task commits, in one request per partition",
    "buffer.memory": "the sink holds a task's records until the task commits (bounded by batch.size per request)",
    "max.in.flight.requests.per.connection": "the sink has one request in flight per connection",
    "retries": "the sink retries until delivery.timeout.ms",
    "retry.backoff.ms": "the client layer's back-off is fixed",
    "partitioner.ignore.keys": "the sink partitions as Kafka's default partitioner does (murmur2 of the key)",
    "fetch.max.wait.ms": "the source reads the offset ranges the driver planned; it does not wait for new data",
    "fetch.min.bytes": "the source reads the offset ranges the driver planned; it does not wait for new data",
    "fetch.max.bytes": "the source bounds a fetch with max.partition.fetch.bytes",
    "max.poll.records": "the source reads whole planned offset ranges (use maxOffsetsPerTrigger)",
    "session.timeout.ms": "the connector joins no consumer group",
    "heartbeat.interval.ms": "the connector joins no consumer group",
    "max.poll.interval.ms": "the connector joins no consumer group",
    "group.protocol": "the connector joins no consumer group",
    "group.instance.id": "the connector joins no consumer group",
    "partition.assignment.strategy": "the connector joins no consumer group",
}
_JAVA_CLASS_LISTS = frozenset({"interceptor.classes"})
_HARMLESS_CLASS_LISTS = frozenset({"metric.reporters", "config.providers"})  # observability only: ignored

_warned: set[str] = set()


@functools.cache
def table() -> dict[str, dict]:
    """{name: {"type": ConfigDef type, "validator": its toString() or None, "in": [roles]}}."""
    with open(TABLE_PATH) as f:
        return json.load(f)


def ignored_reason(name: str, role: str) -> str:
    if name in _REASONS:
        return _REASONS[name]
    roles = table().get(name, {}).get("in", [])
    if role == "sink" and "producer" not in roles:
        return "it is not a producer setting"
    if role == "source" and "consumer" not in roles:
        return "it is not a consumer setting"
    return "the connector's client layer does not read it"


def check(kconf: Mapping[str, str], role: str) -> dict[str, str]:
    """Check the ``kafka.*`` options (prefix removed) of a ``source`` or ``sink``; raise
    KafkaConfigError naming the first wrong one. Returns {name: why it has no effect} for the
    valid ones the connector does not read (logged once per process and name)."""
    known = table()
    ignored: dict[str, str] = {}
    for name in sorted(kconf):
        value = "" if kconf[name] is None else str(kconf[name])
        spec = known.get(name)
        if spec is None:
            if name in CLIENT_LAYER_NAMES:
                continue
            close = difflib.get_close_matches(name, list(known) + sorted(CLIENT_LAYER_NAMES), n=1, cutoff=0.8)
            hint = f"; did you mean kafka.{close[0]}?" if close else ""
            raise KafkaConfigError(f"option kafka.{name} is not a Kafka client configuration (kafka-clients "
                                   f"{TABLE_CLIENT_VERSION} has no such name){hint}")
        if spec["type"] == "CLASS" or name in _JAVA_CLASS_LISTS or name.endswith(".classes"):
            if name in _HARMLESS_CLASS_LISTS:
                ignored[name] = "it names Java classes, which a Python client cannot load"
                continue
            raise KafkaConfigError(f"option kafka.{name} names a Java class, which the connector's Python client "
                                   "cannot run; remove it (see docs/connector.md, 'Options')")
        problem = _invalid(name, value, spec)
        if problem:
            raise KafkaConfigError(f"option kafka.{name}={value!r} is refused: Invalid value {value} for "
                                   f"configuration {name}: {problem} (as the Kafka client's ConfigException)")
        if role == "sink" and name == "acks" and value.strip() not in ("all", "-1"):
            raise KafkaConfigError(f"option kafka.acks={value} is refused: the sink writes with acks=all (its "
                                   "idempotent and transactional writes need it, as Kafka's producer requires "
                                   "acks=all with enable.idempotence)")
        if name not in HONOURED[role] and name not in _HARMLESS_CLASS_LISTS:
            ignored[name] = ignored_reason(name, role)
    for name, why in ignored.items():
        key = f"{role}:{name}"
        if key not in _warned:
            _warned.add(key)
            log.warning("option kafka.%s is ignored by the %s: %s", name, role, why)
    return ignored


_INT_BITS = {"SHORT": 16, "INT": 32, "LONG": 64}
_RANGE = re.compile(r"^\[(?P<lo>-?[0-9.]+)?,\.\.\.(?:,(?P<hi>-?[0-9.]+))?\](?P<or> or (?P<alt>-?[0-9]+))?$")
_LIST = re.compile(r"^(?P<ci>\(case insensitive\) )?\[(?P<items>[^\]]*)\]$")


def _invalid(name: str, value: str, spec: dict) -> str | None:
    """Why ``value`` is not a valid ``spec`` (ConfigDef.parseType, then the validator), or None."""
    kind, validator = spec["type"], spec.get("validator")
    text = value.strip()
    number: float | int | None = None
    if kind == "BOOLEAN":
        if text.lower() not in ("true", "false"):
            return "Expected value to be either true or false"
    elif kind in _INT_BITS:
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            return f"Not a number of type {kind}"
        number = int(text)
        bits = _INT_BITS[kind]
        if not -(1 << (bits - 1)) <= number < (1 << (bits - 1)):
            return f"Not a number of type {kind}"
    elif kind == "DOUBLE":
        try:
            number = float(text)
        except ValueError:
            return "Not a number of type DOUBLE"
    if not validator:
        return None
    if validator == "non-empty string":
        return "String must be non-empty" if not text else None
    m = _RANGE.match(validator)
    if m and number is not None:
        if m.group("alt") is not None and number == int(m.group("alt")):
            return None
        lo, hi = m.group("lo"), m.group("hi")
        if lo is not None and number < float(lo):
            return f"Value must be at least {lo}"
        if hi is not None and number > float(hi):
            return f"Value must be no more than {hi}"
        return None
    m = _LIST.match(validator)
    if m and kind == "STRING":
        items = [i.strip() for i in m.group("items").split(",") if i.strip() and ":" not in i]
        if m.group("ci"):
            ok = text.upper() in {i.upper() for i in items}
        else:
            ok = text in items
        return None if ok else f"String must be one of: {', '.join(items)}"
    return None
