"""The connector's kafka.* options checked against the Kafka client's own definitions
(oncelog/spark/kafka_configs.py): unknown names, bad values, Java classes and acks refused, valid
but unused settings reported as ignored with the reason."""

from __future__ import annotations

import json
import logging

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict

from oncelog.spark import kafka_configs
from oncelog.spark.options import OptionError, sink_options, source_options

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def sink(**kw) -> CaseInsensitiveDict:
    return CaseInsensitiveDict({**BOOT, "topic": "t", **kw})


def source(**kw) -> CaseInsensitiveDict:
    return CaseInsensitiveDict({**BOOT, "subscribe": "t", **kw})


def test_a_misspelt_name_is_refused_with_the_name_meant():
    with pytest.raises(OptionError, match=r"kafka\.compresion\.type is not a Kafka client configuration.*"
                                          r"did you mean kafka\.compression\.type\?"):
        sink_options(sink(**{"kafka.compresion.type": "gzip"}))
    with pytest.raises(OptionError, match=r"kafka\.isolaton\.level .*did you mean kafka\.isolation\.level"):
        source_options(source(**{"kafka.isolaton.level": "read_committed"}))
    with pytest.raises(OptionError, match=r"kafka\.no\.such\.thing is not a Kafka client configuration"):
        source_options(source(**{"kafka.no.such.thing": "1"}))


@pytest.mark.parametrize("role, name, value, message", [
    ("source", "fetch.max.wait.ms", "abc", "Not a number of type INT"),
    ("source", "fetch.max.wait.ms", "-5", "Value must be at least 0"),
    ("sink", "linger.ms", "1.5", "Not a number of type LONG"),
    ("sink", "batch.size", "99999999999", "Not a number of type INT"),
    ("sink", "enable.metrics.push", "yes", "Expected value to be either true or false"),
    ("sink", "compression.gzip.level", "12", "Value must be no more than 9"),
    ("sink", "acks", "2", "String must be one of: all, -1, 0, 1"),
    ("source", "isolation.level", "READ-COMMITTED", "String must be one of: read_committed, read_uncommitted"),
    ("source", "client.dns.lookup", "default", "String must be one of"),
    ("sink", "client.id", "", None),  # a STRING without a validator: anything
])
def test_values_are_checked_as_the_java_client_parses_them(role, name, value, message):
    options = (sink if role == "sink" else source)(**{f"kafka.{name}": value})
    parse = sink_options if role == "sink" else source_options
    if message is None:
        parse(options)
        return
    with pytest.raises(OptionError) as err:
        parse(options)
    assert f"option kafka.{name}={value!r} is refused: Invalid value {value} for configuration {name}: " \
           f"{message}" in str(err.value)


def test_acks_other_than_all_is_refused_by_the_sink():
    for ok in ("all", "-1"):
        sink_options(sink(**{"kafka.acks": ok}))
    for bad in ("0", "1"):
        with pytest.raises(OptionError, match=rf"kafka\.acks={bad} is refused: the sink writes with acks=all"):
            sink_options(sink(**{"kafka.acks": bad}))
    assert kafka_configs.check({"acks": "0"}, "source") == {"acks": "it is not a consumer setting"}


def test_java_classes_are_refused():
    for name in ("partitioner.class", "interceptor.classes", "sasl.login.class"):
        with pytest.raises(OptionError, match=rf"kafka\.{name} names a Java class"):
            sink_options(sink(**{f"kafka.{name}": "com.example.X"}))


def test_valid_settings_the_connector_does_not_read_are_reported_once(caplog):
    kafka_configs._warned.clear()
    with caplog.at_level(logging.WARNING, logger="oncelog.spark.options"):
        sink_options(sink(**{"kafka.linger.ms": "5", "kafka.compression.type": "gzip"}))
        sink_options(sink(**{"kafka.linger.ms": "5"}))
        source_options(source(**{"kafka.fetch.max.wait.ms": "100", "kafka.max.poll.records": "10"}))
    lines = [r.getMessage() for r in caplog.records]
    assert lines.count("option kafka.linger.ms is ignored by the sink: the sink sends each task's records when "
                       "the task commits, in one request per partition") == 1
    assert any(line.startswith("option kafka.fetch.max.wait.ms is ignored by the source") for line in lines)
    assert any(line.startswith("option kafka.max.poll.records is ignored by the source") for line in lines)
    assert not any("compression.type" in line for line in lines)  # read by the sink


def test_what_the_client_layer_reads_is_known_and_security_names_of_librdkafka_are_taken():
    table = kafka_configs.table()
    for role, names in kafka_configs.HONOURED.items():
        unknown = sorted(n for n in names if n not in table and n not in kafka_configs.CLIENT_LAYER_NAMES)
        assert not unknown, (role, unknown)
    assert kafka_configs.check({"ssl.ca.location": "/x.pem", "security.protocol": "SSL"}, "source") == {}


def test_the_committed_table_is_kafka_clients_4_4():
    with open(kafka_configs.TABLE_PATH) as f:
        table = json.load(f)
    assert len(table) > 100 and table["acks"]["validator"] == "[all, -1, 0, 1]"
    assert table["linger.ms"] == {"in": ["producer"], "type": "LONG", "validator": "[0,...]"}
