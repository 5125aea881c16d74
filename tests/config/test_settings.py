"""One home for every setting: the registry, the serve options, BrokerConfig and DescribeConfigs
agree (in-process, no broker)."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from oncelog.cli import build_parser
from oncelog.config import registry
from oncelog.config.serve_options import SERVE_FLAGS, ServeConfigError, build_broker_config, settings_from_args
from oncelog.config.settings import BrokerConfig, LogConfig, default


def serve_args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["serve", *argv])


def config_of(*argv: str) -> BrokerConfig:
    return build_broker_config(settings_from_args(serve_args(*argv)))[0]


def without_given(config: BrokerConfig) -> BrokerConfig:
    return dataclasses.replace(config, given={})


def test_every_setting_names_a_field_and_its_default_is_the_registrys():
    """For every broker config with a field: registry default == BrokerConfig default."""
    config = BrokerConfig(data_dir="d")
    checked = 0
    for name, d in registry.BROKER_CONFIGS.items():
        if d.setting is None or name == "log.dirs":
            continue
        expected = registry.parse_value(name, d.default, d.type)
        assert config.setting(name) == expected, name
        checked += 1
    assert checked >= 20


def test_every_serve_option_default_is_the_registrys_and_the_dataclasss():
    """serve with no option == BrokerConfig(): registry default == CLI default == dataclass default."""
    assert without_given(config_of("--data-dir", "d")) == BrokerConfig(data_dir="d")
    help_text = build_parser()._subparsers._group_actions[0].choices["serve"].format_help()
    for d in SERVE_FLAGS:
        assert d.flag in help_text
        if d.default is not None and d.flag_kind != "negate" and d.name != "log.dirs":
            assert f"(default {d.default})" in " ".join(help_text.split()), d.flag


@pytest.mark.parametrize("flag_def", [d for d in SERVE_FLAGS if d.name != "log.dirs"], ids=lambda d: d.flag)
def test_each_serve_option_sets_its_config_and_only_it(flag_def):
    d = flag_def
    base = BrokerConfig(data_dir="d")
    if d.flag_kind == "negate":
        config = config_of("--data-dir", "d", d.flag)
        assert config.setting(d.name) is False
        value = "false"
    elif d.name == "oncelog.fsync":
        config = config_of("--data-dir", "d", d.flag, "interval:50")
        value = "interval:50"
        assert config.setting(d.name) == value
    elif d.name == "oncelog.metrics.listener":
        value = "127.0.0.1:9308"
        config = config_of("--data-dir", "d", d.flag, value)
        assert config.setting(d.name) == value
    else:
        current = base.setting(d.name) if d.setting else getattr(base.log, registry.TOPIC_CONFIGS[
            registry.synonym_target(d.name)].attr)
        new = current + 7 if current < (1 << 30) else current - 7
        config = config_of("--data-dir", "d", d.flag, str(new))
        value = str(new)
        got = config.setting(d.name) if d.setting else getattr(config.log, registry.TOPIC_CONFIGS[
            registry.synonym_target(d.name)].attr)
        assert got == new
    assert config.given[d.name] == value
    assert config.describe()[d.name] == value
    assert config.static_layer()[d.name] == value
    # Nothing else moved.
    changed = {k for k, v in config.describe().items() if base.describe().get(k) != v}
    assert changed == ({"node.id", "broker.id"} if d.name == "node.id" else {d.name})


def test_describe_is_generated_from_the_registry():
    described = BrokerConfig(data_dir="d").describe()
    assert set(described) <= set(registry.BROKER_CONFIGS)
    for name, d in registry.BROKER_CONFIGS.items():
        if d.setting is not None:
            assert name in described
    for name, c in registry.TOPIC_CONFIGS.items():
        primary = registry.PRIMARY_SYNONYM.get(name)
        if primary and not c.internal:
            assert described[primary] == registry.to_wire(c.default, c.type)


def test_static_layer_holds_what_was_given_and_what_code_changed():
    assert BrokerConfig(data_dir="d").static_layer() == {"log.dirs": "d"}
    changed = BrokerConfig(data_dir="d", num_partitions=3, log=LogConfig(retention_ms=5))
    assert changed.static_layer() == {"log.dirs": "d", "num.partitions": "3", "log.retention.ms": "5"}
    # A synonym given stands for itself; the primary one is not invented over it.
    config = build_broker_config(settings_from_args(serve_args("--data-dir", "d", "--override",
                                                               "log.retention.hours=2")))[0]
    assert config.log.retention_ms == 2 * 3_600_000
    assert config.static_layer() == {"log.dirs": "d", "log.retention.hours": "2"}


def test_defaults_in_units():
    assert default("offsets.retention.minutes") == 7 * 24 * 3_600_000  # minutes -> ms
    assert BrokerConfig(data_dir="d").group.offsets_retention_ms == 7 * 24 * 3_600_000
    assert BrokerConfig(data_dir="d").log_cleaner_backoff_ms == 30_000  # oncelog's default, Kafka's 15000


def test_bad_flag_values_name_the_option():
    with pytest.raises(ServeConfigError, match=r"--num-partitions: Invalid value 0 for configuration num.partitions: "
                                               r"Value must be at least 1"):
        config_of("--data-dir", "d", "--num-partitions", "0")
    with pytest.raises(ServeConfigError, match="--fsync: --fsync must be always, never or interval:MS"):
        config_of("--data-dir", "d", "--fsync", "sometimes")
    with pytest.raises(ServeConfigError, match=r"--group-min-session-timeout-ms \(9000\) is above "
                                               r"--group-max-session-timeout-ms \(8000\)"):
        config_of("--data-dir", "d", "--group-min-session-timeout-ms", "9000", "--group-max-session-timeout-ms", "8000")
    with pytest.raises(ServeConfigError, match="no data directory"):
        config_of()
