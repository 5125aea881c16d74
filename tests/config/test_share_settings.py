"""The broker's share-group settings (Kafka 4.4's ``group.share.*``): given with ``--override`` or
in a ``--config`` file, checked as Kafka checks them (each value's range, then the cross-checks:
a wrong value stops the start naming the setting), described on the BROKER resource, the
defaults and bounds of a GROUP's ``share.*`` configs, and run by the share coordinator: members
per group, share sessions, lock duration, delivery limit, in-flight limit, session and heartbeat.
What Apache Kafka 4.4 shows with its default settings (the names, values and sources described,
the GROUP refusals) is compared on the wire in tests/kafka/conformance/scenarios_share.py."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType
from kio.schema.errors import ErrorCode

from oncelog.cli import build_parser
from oncelog.config import group_configs as gc
from oncelog.config.registry import ConfigError
from oncelog.config.serve_options import ServeConfigError, build_broker_config, settings_from_args
from oncelog.config.settings import BrokerConfig, GroupConfig
from oncelog.process import BrokerProcess

from ..apis.harness import run


def build(*argv: str):
    return build_broker_config(settings_from_args(build_parser().parse_args(["serve", "--data-dir", "/tmp/x",
                                                                               *argv])))


def overrides(**settings) -> list[str]:
    return [arg for k, v in settings.items() for arg in ("--override", f"group.share.{k.replace('_', '.')}={v}")]


# ---------------------------------------------------------------------- validation, sans I/O


def test_defaults_are_kafkas_and_are_described():
    config, _ = build()
    described = config.describe()
    assert {k: v for k, v in described.items() if k.startswith("group.share.")} == {
        "group.share.max.size": "200", "group.share.max.share.sessions": "2000",
        "group.share.session.timeout.ms": "45000", "group.share.min.session.timeout.ms": "45000",
        "group.share.max.session.timeout.ms": "60000", "group.share.heartbeat.interval.ms": "5000",
        "group.share.min.heartbeat.interval.ms": "5000", "group.share.max.heartbeat.interval.ms": "15000",
        "group.share.record.lock.duration.ms": "30000", "group.share.min.record.lock.duration.ms": "15000",
        "group.share.max.record.lock.duration.ms": "60000", "group.share.delivery.count.limit": "5",
        "group.share.min.delivery.count.limit": "2", "group.share.max.delivery.count.limit": "10",
        "group.share.partition.max.record.locks": "2000", "group.share.min.partition.max.record.locks": "100",
        "group.share.max.partition.max.record.locks": "4000"}
    assert not any(k.startswith("group.share.") for k in config.static_layer())


def test_overrides_and_a_config_file_set_them(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("group.share.max.size=2\ngroup.share.min.record.lock.duration.ms=1000\n")
    config, _ = build("--config", str(path), *overrides(record_lock_duration_ms=5000, delivery_count_limit=2))
    g = config.group
    assert (g.share_max_size, g.share_record_lock_duration_ms, g.share_min_record_lock_duration_ms,
            g.share_delivery_count_limit) == (2, 5000, 1000, 2)
    assert config.static_layer()["group.share.max.size"] == "2"
    assert config.static_layer()["group.share.record.lock.duration.ms"] == "5000"


@pytest.mark.parametrize("setting, message", [
    ("max.size=0", "Invalid value 0 for configuration group.share.max.size: Value must be at least 1"),
    ("max.size=1001", "Invalid value 1001 for configuration group.share.max.size: Value must be no more than 1000"),
    ("max.share.sessions=0", "group.share.max.share.sessions: Value must be at least 1"),
    ("record.lock.duration.ms=999", "group.share.record.lock.duration.ms: Value must be at least 1000"),
    ("min.record.lock.duration.ms=30001", "group.share.min.record.lock.duration.ms: Value must be no more than 30000"),
    ("max.record.lock.duration.ms=29999", "group.share.max.record.lock.duration.ms: Value must be at least 30000"),
    ("delivery.count.limit=11", "group.share.delivery.count.limit: Value must be no more than 10"),
    ("min.delivery.count.limit=1", "group.share.min.delivery.count.limit: Value must be at least 2"),
    ("max.delivery.count.limit=26", "group.share.max.delivery.count.limit: Value must be no more than 25"),
    ("partition.max.record.locks=99", "group.share.partition.max.record.locks: Value must be at least 100"),
    ("min.partition.max.record.locks=2001", "group.share.min.partition.max.record.locks: Value must be no more"),
    ("max.partition.max.record.locks=1999", "group.share.max.partition.max.record.locks: Value must be at least"),
    ("session.timeout.ms=0", "group.share.session.timeout.ms: Value must be at least 1"),
    ("heartbeat.interval.ms=x", "Invalid value x for configuration group.share.heartbeat.interval.ms: Not a number"),
])
def test_each_value_is_checked_against_kafkas_range(setting, message):
    with pytest.raises(ServeConfigError, match="^--override: .*" + message.replace(".", r"\.")):
        build("--override", "group.share." + setting)


@pytest.mark.parametrize("settings, message", [
    ({"max_share_sessions": 100},
     "group.share.max.share.sessions must be greater than or equal to group.share.max.size "
     "(group.share.max.share.sessions=100, group.share.max.size=200)"),
    ({"record_lock_duration_ms": 10000},
     "group.share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
    ({"record_lock_duration_ms": 90000},
     "group.share.max.record.lock.duration.ms must be greater than or equal to group.share.record.lock.duration.ms"),
    ({"delivery_count_limit": 2, "min_delivery_count_limit": 3},
     "group.share.delivery.count.limit must be greater than or equal to group.share.min.delivery.count.limit"),
    ({"partition_max_record_locks": 5000},
     "group.share.max.partition.max.record.locks must be greater than or equal to "
     "group.share.partition.max.record.locks"),
    ({"session_timeout_ms": 30000},
     "group.share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms"),
    ({"heartbeat_interval_ms": 20000},
     "group.share.heartbeat.interval.ms must be less than or equal to group.share.max.heartbeat.interval.ms"),
    ({"min_heartbeat_interval_ms": 20000},
     "group.share.max.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms"),
    ({"heartbeat_interval_ms": 50000, "max_heartbeat_interval_ms": 60000},
     "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms"),
])
def test_kafkas_cross_checks_refuse_to_start(settings, message):
    with pytest.raises(ServeConfigError) as caught:
        build(*overrides(**settings))
    assert str(caught.value).startswith(message), caught.value
    assert str(caught.value).endswith("(as Kafka, the broker does not start)")


def test_values_that_fit_together_are_accepted():
    config, _ = build(*overrides(max_size=1000, max_share_sessions=1000, session_timeout_ms=3000,
                                 min_session_timeout_ms=1000, heartbeat_interval_ms=500,
                                 min_heartbeat_interval_ms=100, record_lock_duration_ms=1000,
                                 min_record_lock_duration_ms=1000, delivery_count_limit=10,
                                 max_delivery_count_limit=25, partition_max_record_locks=10000,
                                 max_partition_max_record_locks=10000))
    assert config.group.share_settings_error() is None


def test_group_configs_take_their_defaults_and_bounds_from_the_broker():
    wide = GroupConfig(share_min_record_lock_duration_ms=1000, share_record_lock_duration_ms=4000,
                       share_delivery_count_limit=3, share_max_partition_max_record_locks=10000,
                       share_min_session_timeout_ms=1000, share_session_timeout_ms=6000,
                       share_min_heartbeat_interval_ms=100, share_heartbeat_interval_ms=1000)
    assert {k: v for k, v in gc.share_settings({}, wide).items() if type(v) is int} == {
        "share.session.timeout.ms": 6000, "share.heartbeat.interval.ms": 1000, "share.record.lock.duration.ms": 4000,
        "share.delivery.count.limit": 3, "share.partition.max.record.locks": 2000}
    gc.validate({"share.record.lock.duration.ms": "1000", "share.partition.max.record.locks": "9000",
                 "share.session.timeout.ms": "2000", "share.heartbeat.interval.ms": "100"}, wide)
    for name, value, bounds in (("share.record.lock.duration.ms", "1000", "15000 to 60000"),
                                ("share.partition.max.record.locks", "9000", "100 to 4000"),
                                ("share.session.timeout.ms", "2000", "45000 to 60000"),
                                ("share.heartbeat.interval.ms", "100", "5000 to 15000")):
        with pytest.raises(ConfigError, match=f"^{name} must be in the range {bounds} inclusive.$"):
            gc.validate({name: value}, GroupConfig())
    # The session must exceed the heartbeat in force: the broker's when the group has none.
    with pytest.raises(ConfigError, match="^share.session.timeout.ms must be greater than share.heartbeat"):
        gc.validate({"share.session.timeout.ms": "1000"}, wide)
    # A group value stored under wider bounds is clamped into the broker's current ones.
    assert gc.share_settings({"share.record.lock.duration.ms": "1000"}, GroupConfig())[
        "share.record.lock.duration.ms"] == 15000


def test_the_share_coordinator_runs_by_the_brokers_settings(tmp_path):
    group = GroupConfig(share_max_size=3, share_max_share_sessions=3, share_record_lock_duration_ms=20000,
                        share_partition_max_record_locks=150)

    async def scenario(api):
        share = api.broker.share
        assert (share.groups.max_size, share.sessions.max_sessions) == (3, 3)
        settings = share.settings("any-group")
        assert (settings["share.record.lock.duration.ms"], settings["share.partition.max.record.locks"]) \
            == (20000, 150)
        await api.create_topic("t")
        tid = api.broker.metadata.topics.get("t").topic_id
        assert share.share_partition("g", "t", tid, 0).max_in_flight == 150

    run(tmp_path, scenario, group=group)
    assert BrokerConfig(data_dir="x", group=group).describe()["group.share.max.share.sessions"] == "3"


@pytest.mark.e2e
def test_a_wrong_setting_stops_the_start_naming_it(tmp_path):
    done = subprocess.run([sys.executable, "-m", "oncelog", "serve", "--data-dir", str(tmp_path / "data"),
                           "--override", "group.share.max.share.sessions=10"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert ("oncelog serve: group.share.max.share.sessions must be greater than or equal to group.share.max.size "
            "(group.share.max.share.sessions=10, group.share.max.size=200)") in done.stderr
    assert not os.path.exists(tmp_path / "data")


# ---------------------------------------------------------------------- over TCP


@pytest.mark.e2e
@pytest.mark.parametrize("nodes", [1, 2])
def test_a_broker_started_with_share_settings_runs_by_them(tmp_path, nodes):
    """group.share.max.size=2 (a file), a 5 s lock with a 1 s floor and 2 deliveries (overrides),
    on one node and on every node of a two-node cluster: a third member is refused
    GROUP_MAX_SIZE_REACHED; ShareFetch's acquisition_lock_timeout is the broker's 5000 and a
    GROUP's 2000 (refused by Kafka's default floor, here within the broker's bounds); a record
    released twice is archived; DescribeConfigs shows the settings as given."""
    from ..kafka.conformance.framework import Conversation
    from ..kafka.conformance.scenarios_share import RELEASE, Member, produce_values, share_group, topic_id

    path = tmp_path / "server.properties"
    path.write_text("group.share.max.size=2\n")
    b = BrokerProcess(str(tmp_path / "broker"), nodes=nodes, fsync="never", extra_args=[
        "--config", str(path), *overrides(record_lock_duration_ms=5000, min_record_lock_duration_ms=1000,
                                          delivery_count_limit=2)])
    b.start()
    k = Conversation("oncelog-cluster" if nodes > 1 else "oncelog", b.bootstrap, uuid.uuid4().hex[:6])
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    try:
        # Every node describes the settings it was started with.
        for node in sorted(k.router.nodes) if k.router.clustered else [1]:
            res = ConfigResource(ResourceType.BROKER, str(node))
            got = admin.describe_configs([res])[res].result(30)
            assert (got["group.share.max.size"].value, got["group.share.max.size"].source) \
                == ("2", ConfigSource.STATIC_BROKER_CONFIG.value)
            assert got["group.share.record.lock.duration.ms"].value == "5000"
            assert (got["group.share.max.share.sessions"].value, got["group.share.max.share.sessions"].source) \
                == ("2000", ConfigSource.DEFAULT_CONFIG.value)
            assert got["group.share.max.size"].is_read_only

        t = k.create_topic("t", 2)
        produce_values(k, t, [b"a", b"b"], partition=0)
        produce_values(k, t, [b"c"], partition=1)
        tid = topic_id(k, t)
        g = share_group(k)
        a, b2, c = (Member(k, g, role, own_connection=True) for role in "abc")
        a.join(t)
        b2.join(t, want=1)
        refused = c.heartbeat(topics=[t])
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.group_max_size_reached, f"The share group {g} has reached its maximum capacity of 2 members.")

        # Each partition's leader (both nodes on a cluster) locks for the broker's 5 s.
        first = a.fetch_until(tid, partitions=(0,))
        assert first.acquisition_lock_timeout == datetime.timedelta(milliseconds=5000)
        assert [(r.first_offset, r.last_offset, r.delivery_count)
                for p in first.responses[0].partitions for r in p.acquired_records] == [(0, 1, 1)]
        other = b2.fetch_until(tid, partitions=(1,))
        assert other.acquisition_lock_timeout == datetime.timedelta(milliseconds=5000)

        # group.share.delivery.count.limit=2: released at the second delivery, the records are archived.
        again = a.fetch_until(tid, partitions=(0,), acks={0: [(0, 1, [RELEASE])]})
        assert [(r.first_offset, r.last_offset, r.delivery_count)
                for p in again.responses[0].partitions for r in p.acquired_records] == [(0, 1, 2)]
        done = a.fetch(tid, partitions=(0,), acks={0: [(0, 1, [RELEASE])]}, max_wait_ms=200)
        assert not any(p.acquired_records for t_ in done.responses for p in t_.partitions)

        # A GROUP's lock duration: within the broker's bounds (1000..60000), not outside them.
        def alter(group: str, value: str) -> None:
            res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
                "share.record.lock.duration.ms", value, incremental_operation=AlterConfigOpType.SET)])
            for f in admin.incremental_alter_configs([res]).values():
                f.result(30)

        with pytest.raises(KafkaException, match="share.record.lock.duration.ms must be in the range 1000 to "
                                                 "60000 inclusive."):
            alter(g, "60001")
        g2 = share_group(k, "g2")
        alter(g2, "2000")
        d = Member(k, g2, "d", own_connection=True)
        d.join(t, want=1)
        k.wait_until(lambda: d.fetch(tid, partitions=(1,), max_wait_ms=100).acquisition_lock_timeout
                     == datetime.timedelta(milliseconds=2000), "g2's lock duration of 2000 ms on partition 1's leader")
    finally:
        k.close()
        b.kill()
