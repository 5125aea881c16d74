"""oncelog.metrics.state against a real broker (oncelog.testing's in-process kind) driven by real
clients (confluent_kafka): records produced, group offsets committed, a transaction left open,
then committed or timed out — and the scrape's numbers are exactly what was done: log offsets
and sizes, the last stable offset lag an open transaction causes (and 0 once it ends), a group's
committed offsets and its lag against the high watermark and the last stable offset, group
counts by protocol and state, transaction counts, the rebalance and timeout counters."""

from __future__ import annotations

import asyncio
import glob
import os
import time
import urllib.request

import confluent_kafka as ck
import pytest
from prometheus_client.parser import text_string_to_metric_families

from oncelog.metrics import state
from oncelog.testing import Broker

pytestmark = pytest.mark.e2e

TOPIC = "orders"


@pytest.fixture
def broker():
    with Broker(kind="thread") as b:
        yield b


def scrape(broker) -> dict:
    """state.collect on the broker's loop (as a scrape runs it): {(name, labels): value}."""
    async def on_loop():
        return state.collect(broker._inner)

    families = asyncio.run_coroutine_threadsafe(on_loop(), broker._loop).result(10)
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def value(samples: dict, name: str, **labels):
    return samples.get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))))


def eventually(broker, check, timeout: float = 10.0) -> dict:
    """Scrape until ``check(samples)`` holds (a marker's fsync, a heartbeat land a moment after
    the client's call returns); the last scrape is returned for exact asserts."""
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(broker)
        if check(samples) or time.monotonic() > deadline:
            return samples
        time.sleep(0.05)


def produce(broker, partition: int, n: int, **conf) -> None:
    p = ck.Producer(broker.client_config(acks="all", enable_idempotence=True, **conf))
    for i in range(n):
        p.produce(TOPIC, value=b"v%d" % i, partition=partition)
    assert p.flush(10) == 0


def commit(broker, group: str, offsets: dict[int, int]) -> None:
    c = ck.Consumer(broker.client_config(group_id=group, enable_auto_commit=False))
    try:
        c.commit(offsets=[ck.TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def test_logs_lag_and_an_open_transaction_then_its_commit(broker):
    broker.create_topic(TOPIC, partitions=2)
    produce(broker, 0, 10)
    produce(broker, 1, 3)
    commit(broker, "g", {0: 4, 1: 2})
    txp = ck.Producer(broker.client_config(transactional_id="tx-1"))
    txp.init_transactions(10)
    txp.begin_transaction()
    for i in range(5):
        txp.produce(TOPIC, value=b"t%d" % i, partition=1)
    assert txp.flush(10) == 0

    s = scrape(broker)
    # Per partition: 10 records on 0; 3 + 5 transactional on 1, of which the 5 are held back.
    for p, end in ((0, 10), (1, 8)):
        assert value(s, "kafka_log_log_logendoffset", topic=TOPIC, partition=p) == end
        assert value(s, "oncelog_partition_high_watermark", topic=TOPIC, partition=p) == end
        assert value(s, "kafka_log_log_logstartoffset", topic=TOPIC, partition=p) == 0
        assert value(s, "kafka_log_log_numlogsegments", topic=TOPIC, partition=p) == 1
        on_disk = sum(os.path.getsize(f) for f in glob.glob(os.path.join(
            broker.data_dir, "**", f"{TOPIC}-{p}", "*.log"), recursive=True))
        assert on_disk > 0
        assert value(s, "kafka_log_log_size", topic=TOPIC, partition=p) == on_disk
    assert value(s, "oncelog_partition_last_stable_offset", topic=TOPIC, partition=0) == 10
    assert value(s, "kafka_cluster_partition_laststableoffsetlag", topic=TOPIC, partition=0) == 0
    assert value(s, "oncelog_partition_last_stable_offset", topic=TOPIC, partition=1) == 3
    assert value(s, "kafka_cluster_partition_laststableoffsetlag", topic=TOPIC, partition=1) == 5
    # Lag: committed 4 and 2; against the high watermark (10, 8) and the LSO (10, 3).
    assert value(s, "kafka_consumergroup_current_offset", consumergroup="g", topic=TOPIC, partition=0) == 4
    assert value(s, "kafka_consumergroup_current_offset", consumergroup="g", topic=TOPIC, partition=1) == 2
    assert value(s, "kafka_consumergroup_lag", consumergroup="g", topic=TOPIC, partition=0) == 6
    assert value(s, "kafka_consumergroup_lag", consumergroup="g", topic=TOPIC, partition=1) == 6
    assert value(s, "oncelog_consumergroup_lag_stable", consumergroup="g", topic=TOPIC, partition=0) == 6
    assert value(s, "oncelog_consumergroup_lag_stable", consumergroup="g", topic=TOPIC, partition=1) == 1
    assert value(s, "kafka_consumergroup_lag_sum", consumergroup="g", topic=TOPIC) == 12
    assert value(s, "kafka_consumergroup_current_offset_sum", consumergroup="g", topic=TOPIC) == 6
    assert value(s, "kafka_consumergroup_members", consumergroup="g") == 0
    # The commit made a memberless classic group: Empty.
    assert value(s, "kafka_server_group_coordinator_metrics_group_count", protocol="classic") == 1
    assert value(s, "kafka_server_group_coordinator_metrics_classic_group_count", state="Empty") == 1
    assert value(s, "kafka_server_group_coordinator_metrics_offset_count") == 2
    # The transaction: open, Ongoing, for about as long as since begin_transaction's first write.
    assert value(s, "oncelog_transactions", state="Ongoing") == 1
    assert value(s, "oncelog_transactions", state="PrepareCommit") == 0
    assert value(s, "oncelog_transactional_ids") == 1
    assert 0 <= value(s, "oncelog_transaction_oldest_open_seconds") < 30
    # Producer ids: the idempotent producers (one per partition written) and the transactional
    # one, each counted in each partition that holds it (Kafka sums per partition too).
    assert value(s, "kafka_server_replicamanager_produceridcount") == 3
    # Partitions: every topic's (the internal ones too), all led by this one node.
    md = ck.admin.AdminClient(broker.client_config()).list_topics(timeout=10)
    assert value(s, "kafka_server_replicamanager_partitioncount") == sum(len(t.partitions) for t in md.topics.values())
    assert value(s, "kafka_server_replicamanager_leadercount") == value(s, "kafka_server_replicamanager_partitioncount")

    txp.commit_transaction(10)
    # The COMMIT marker takes offset 8: partition 1 ends at 9, all of it stable.
    # (the coordinator completes the commit once the markers are durable: until then it is open)
    s = eventually(broker, lambda s: value(s, "kafka_cluster_partition_laststableoffsetlag",
                                           topic=TOPIC, partition=1) == 0
                   and value(s, "oncelog_partition_high_watermark", topic=TOPIC, partition=1) == 9
                   and value(s, "oncelog_transaction_oldest_open_seconds") == 0)
    assert value(s, "kafka_log_log_logendoffset", topic=TOPIC, partition=1) == 9
    assert value(s, "oncelog_partition_last_stable_offset", topic=TOPIC, partition=1) == 9
    assert value(s, "kafka_cluster_partition_laststableoffsetlag", topic=TOPIC, partition=1) == 0
    assert value(s, "kafka_consumergroup_lag", consumergroup="g", topic=TOPIC, partition=1) == 7
    assert value(s, "oncelog_consumergroup_lag_stable", consumergroup="g", topic=TOPIC, partition=1) == 7
    assert value(s, "kafka_consumergroup_lag_sum", consumergroup="g", topic=TOPIC) == 13
    assert value(s, "oncelog_transactions", state="Ongoing") == 0
    assert value(s, "oncelog_transaction_oldest_open_seconds") == 0
    assert value(s, "oncelog_transaction_timed_out_total") == 0
    txp.flush(1)


def test_a_transaction_past_its_timeout_is_counted_and_releases_the_lso(broker):
    broker.create_topic(TOPIC, partitions=1)
    txp = ck.Producer(broker.client_config(transactional_id="tx-slow", transaction_timeout_ms=1000))
    txp.init_transactions(10)
    txp.begin_transaction()
    for i in range(4):
        txp.produce(TOPIC, value=b"t%d" % i, partition=0)
    assert txp.flush(10) == 0
    s = scrape(broker)
    assert value(s, "kafka_cluster_partition_laststableoffsetlag", topic=TOPIC, partition=0) == 4
    assert value(s, "oncelog_transactions", state="Ongoing") == 1

    # The coordinator aborts it after 1 s: an ABORT marker at 4, nothing held back.
    s = eventually(broker, lambda s: value(s, "oncelog_transaction_timed_out_total") == 1
                   and value(s, "kafka_cluster_partition_laststableoffsetlag", topic=TOPIC, partition=0) == 0
                   and value(s, "oncelog_transactions", state="PrepareAbort") == 0
                   and value(s, "oncelog_transaction_oldest_open_seconds") == 0, timeout=15)
    assert value(s, "oncelog_transaction_timed_out_total") == 1
    assert value(s, "kafka_log_log_logendoffset", topic=TOPIC, partition=0) == 5
    assert value(s, "oncelog_partition_last_stable_offset", topic=TOPIC, partition=0) == 5
    assert value(s, "kafka_cluster_partition_laststableoffsetlag", topic=TOPIC, partition=0) == 0
    assert value(s, "oncelog_transactions", state="Ongoing") == 0
    assert value(s, "oncelog_transaction_oldest_open_seconds") == 0


def consume_all(broker, group: str, protocol: str, n: int) -> ck.Consumer:
    conf = broker.client_config(group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                                group_protocol=protocol)
    if protocol == "classic":
        conf["session.timeout.ms"] = 6000
    c = ck.Consumer(conf)
    c.subscribe([TOPIC])
    got, deadline = 0, time.monotonic() + 30
    while got < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    assert got == n
    c.commit(asynchronous=False)
    return c


def test_classic_and_consumer_groups_by_protocol_and_state_with_their_rebalances(broker):
    broker.create_topic(TOPIC, partitions=1)
    produce(broker, 0, 7)
    classic = consume_all(broker, "g-classic", "classic", 7)
    modern = consume_all(broker, "g-848", "consumer", 7)
    try:
        s = eventually(broker, lambda s: value(s, "kafka_server_group_coordinator_metrics_consumer_group_count",
                                               state="Stable") == 1)
        assert value(s, "kafka_server_group_coordinator_metrics_group_count", protocol="classic") == 1
        assert value(s, "kafka_server_group_coordinator_metrics_group_count", protocol="consumer") == 1
        assert value(s, "kafka_server_group_coordinator_metrics_group_count", protocol="share") == 0
        assert value(s, "kafka_server_group_coordinator_metrics_group_count", protocol="streams") == 0
        assert value(s, "kafka_server_group_coordinator_metrics_classic_group_count", state="Stable") == 1
        assert value(s, "kafka_server_group_coordinator_metrics_classic_group_count", state="Empty") == 0
        assert value(s, "kafka_server_group_coordinator_metrics_consumer_group_count", state="Stable") == 1
        # One member joined each: one completed classic rebalance, one consumer group epoch bump.
        assert value(s, "kafka_server_group_coordinator_metrics_group_completed_rebalance_count") == 1
        assert value(s, "kafka_server_group_coordinator_metrics_consumer_group_rebalance_count") == 1
        for group in ("g-classic", "g-848"):
            assert value(s, "kafka_consumergroup_current_offset", consumergroup=group, topic=TOPIC, partition=0) == 7
            assert value(s, "kafka_consumergroup_lag", consumergroup=group, topic=TOPIC, partition=0) == 0
            assert value(s, "oncelog_consumergroup_lag_stable", consumergroup=group, topic=TOPIC, partition=0) == 0
            assert value(s, "kafka_consumergroup_members", consumergroup=group) == 1
        produce(broker, 0, 2)
        s = scrape(broker)
        for group in ("g-classic", "g-848"):
            assert value(s, "kafka_consumergroup_lag", consumergroup=group, topic=TOPIC, partition=0) == 2
            assert value(s, "kafka_consumergroup_lag_sum", consumergroup=group, topic=TOPIC) == 2
    finally:
        classic.close()
        modern.close()


def test_the_families_reach_prometheus_through_the_metrics_endpoint():
    with Broker(kind="thread", config={"oncelog.metrics.listener": "127.0.0.1:0"}) as broker:
        broker.create_topic(TOPIC, partitions=1)
        produce(broker, 0, 3)
        commit(broker, "g", {0: 1})
        host, port = broker._inner.metrics_address
        text = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10).read().decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    assert value(samples, "kafka_log_log_logendoffset", topic=TOPIC, partition=0) == 3
    assert value(samples, "kafka_consumergroup_lag", consumergroup="g", topic=TOPIC, partition=0) == 2
    assert value(samples, "kafka_server_group_coordinator_metrics_group_count", protocol="classic") == 1
    assert value(samples, "oncelog_transactions", state="Ongoing") == 0


def test_a_scrape_of_a_broker_not_yet_opened_or_half_broken_raises_nothing(broker):
    broker.create_topic(TOPIC, partitions=1)
    inner = broker._inner

    async def on_loop():
        groups, txn = inner.groups, inner.txn
        try:
            inner.groups = None  # as before Broker.open
            inner.txn = object()  # a section that fails: the others are still reported
            return state.collect(inner)
        finally:
            inner.groups, inner.txn = groups, txn

    families = asyncio.run_coroutine_threadsafe(on_loop(), broker._loop).result(10)
    names = {f.name for f in families}
    assert "kafka_log_log_logendoffset" in names
    assert "oncelog_transactions" not in names
    assert "kafka_consumergroup_lag" not in names
