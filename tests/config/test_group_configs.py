"""oncelog.config.group_configs, the GROUP config resource's rules, without a broker: what the
wire-level comparison with Apache Kafka 4.4 (tests/kafka/conformance, group_configs_*) cannot
show with one broker setting — the bounds come from the broker's own group.consumer.min/max.*,
a stored value outside later bounds is clamped (Kafka's GroupConfig.evaluate), and the store
keeps a change only once it is written."""

from __future__ import annotations

import json

import pytest

from oncelog import errors
from oncelog.config import group_configs as gc
from oncelog.config.registry import ConfigError
from oncelog.config.settings import GroupConfig
from oncelog.metadata.configs import GroupConfigs
from oncelog.metadata.store import GROUP_CONFIGS as FILE, MetadataStore

WIDE = GroupConfig(consumer_min_session_timeout_ms=1000, consumer_max_session_timeout_ms=60000,
                   consumer_min_heartbeat_interval_ms=100, consumer_max_heartbeat_interval_ms=15000)


def test_bounds_are_the_brokers_own():
    narrow = GroupConfig(consumer_min_session_timeout_ms=45000, consumer_min_heartbeat_interval_ms=5000)
    gc.validate({"consumer.session.timeout.ms": "3000", "consumer.heartbeat.interval.ms": "300"}, WIDE)
    with pytest.raises(ConfigError, match=r"^consumer.heartbeat.interval.ms must be in the range 5000 to 15000"):
        gc.validate({"consumer.session.timeout.ms": "3000", "consumer.heartbeat.interval.ms": "300"}, narrow)


def test_session_must_exceed_the_heartbeat_in_force():
    """Either side may be the broker's: a group heartbeat at the broker's session is refused."""
    broker = GroupConfig(consumer_session_timeout_ms=10000, consumer_min_session_timeout_ms=1000,
                         consumer_min_heartbeat_interval_ms=100)
    with pytest.raises(ConfigError, match="^consumer.session.timeout.ms must be greater than "
                                          "consumer.heartbeat.interval.ms$"):
        gc.validate({"consumer.heartbeat.interval.ms": "10000"}, broker)
    gc.validate({"consumer.heartbeat.interval.ms": "9999"}, broker)


def test_values_outside_later_bounds_are_clamped():
    """A value set under wide bounds, read by a broker started with narrower ones: the nearest bound."""
    props = {"consumer.session.timeout.ms": "2000", "consumer.heartbeat.interval.ms": "14000",
             "consumer.assignment.interval.ms": "500", "share.session.timeout.ms": "50000"}
    later = GroupConfig(consumer_min_session_timeout_ms=5000, consumer_max_heartbeat_interval_ms=10000)
    assert gc.consumer_settings(props, later) == {"consumer.session.timeout.ms": 5000,
                                                  "consumer.heartbeat.interval.ms": 10000,
                                                  "consumer.assignment.interval.ms": 500}


def test_internal_configs_are_described_only_once_set():
    def names(props):
        return [d.name for d in gc.describe(props, lambda n: [(n, "1", 5)], include_synonyms=True,
                                             include_docs=False)]
    assert "consumer.assignor.offload.enable" not in names({})
    assert len(names({})) == 21
    # Kafka 4.4's order (measured): the internal ones set come first, in its hash map's order.
    assert names({"consumer.assignor.offload.enable": "false", "share.assignor.offload.enable": "false",
                  "streams.acceptable.recovery.lag": "5"})[:4] == [
        "share.assignor.offload.enable", "consumer.assignor.offload.enable", "streams.acceptable.recovery.lag",
        "consumer.session.timeout.ms"]


def test_store_writes_before_it_applies_and_reads_back(tmp_path):
    store = GroupConfigs(MetadataStore(str(tmp_path)), WIDE)
    store.replace("g", {"consumer.heartbeat.interval.ms": "700"}, validate_only=False)
    assert json.loads((tmp_path / FILE).read_text()) == {"g": {"consumer.heartbeat.interval.ms": "700"}}
    store.replace("g", {"consumer.heartbeat.interval.ms": "900"}, validate_only=True)
    with pytest.raises(errors.InvalidConfig):
        store.replace("g", {"consumer.heartbeat.interval.ms": "0"}, validate_only=False)
    again = GroupConfigs(MetadataStore(str(tmp_path)), WIDE)
    assert again.consumer_settings("g") == {"consumer.heartbeat.interval.ms": 700}
    # A write that fails (here: the file's place is a directory) changes nothing in memory.
    (tmp_path / FILE).unlink()
    (tmp_path / FILE).mkdir()
    with pytest.raises(errors.KafkaStorageError):
        again.replace("g", {}, validate_only=False)
    assert again.get("g") == {"consumer.heartbeat.interval.ms": "700"}
