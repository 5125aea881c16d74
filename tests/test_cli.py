"""The ``oncelog`` admin commands against a real broker."""

from __future__ import annotations

import subprocess
import sys
import time

import confluent_kafka as ck

from .helpers import create_topic


def oncelog(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "oncelog", *args], capture_output=True, text=True, timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_topics_commands(broker):
    b = ["--bootstrap", broker.bootstrap]
    oncelog("topics", *b, "create", "orders", "--partitions", "3", "--config", "retention.ms=3600000")
    assert "orders" in oncelog("topics", *b, "list").stdout
    out = oncelog("topics", *b, "describe", "orders").stdout
    assert "retention.ms" in out and "3600000" in out and "topic" in out
    dup = oncelog("topics", *b, "create", "orders", check=False)
    assert dup.returncode == 1 and "TOPIC_ALREADY_EXISTS" in dup.stderr
    oncelog("topics", *b, "delete", "orders")
    assert "orders" not in oncelog("topics", *b, "list").stdout


def test_groups_and_producers_commands(broker):
    b = ["--bootstrap", broker.bootstrap]
    create_topic(broker.bootstrap, "lag", 2)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for i in range(10):
        p.produce("lag", value=b"x", partition=i % 2)
    p.flush(10)
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lagging", "enable.auto.commit": False})
    c.commit(offsets=[ck.TopicPartition("lag", 0, 2), ck.TopicPartition("lag", 1, 5)], asynchronous=False)
    c.close()
    out = oncelog("groups", *b, "describe", "lagging").stdout
    assert "│ 0         │ 2         │ 5" in out.replace("  ", "  ")  # partition 0: committed 2 of 5: lag 3
    assert "lagging" in oncelog("groups", *b, "list").stdout
    prod = oncelog("producers", *b, "describe", "lag").stdout
    assert "last sequence" in prod and "│ 4 " in prod  # 5 records per partition: last sequence 4
    oncelog("groups", *b, "delete", "lagging")
    assert "lagging" not in oncelog("groups", *b, "list").stdout


def test_transactions_list_describe_hanging_and_abort(broker):
    b = ["--bootstrap", broker.bootstrap]
    create_topic(broker.bootstrap, "tx", 1)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "cli-txn"})
    p.init_transactions(20)
    p.begin_transaction()
    p.produce("tx", value=b"stuck")
    p.flush(10)
    assert "cli-txn" in oncelog("transactions", *b, "list").stdout
    desc = oncelog("transactions", *b, "describe", "cli-txn").stdout
    assert "Ongoing" in desc and "tx: partitions [0]" in desc
    assert "no hanging transactions" in oncelog("transactions", *b, "hanging").stdout
    out = oncelog("transactions", *b, "abort", "--topic", "tx", "--partition", "0").stdout
    assert "abort marker" in out and "none" in out.lower()
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x", "isolation.level": "read_committed"})
    deadline = time.monotonic() + 10
    while c.get_watermark_offsets(ck.TopicPartition("tx", 0), timeout=10)[1] < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert c.get_watermark_offsets(ck.TopicPartition("tx", 0), timeout=10)[1] == 2  # LSO past data + marker
    c.close()
