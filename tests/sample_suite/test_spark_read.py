"""A Spark job's test: a batch read through the connector, ``spark.read.format("oncelog")``, with
the plugin's ``spark_session`` (the session's one local SparkSession)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from .helpers import TIMEOUT

pytestmark = [pytest.mark.e2e, pytest.mark.any_kafka]


def test_spark_reads_the_committed_records(oncelog_broker, spark_session):
    topic = oncelog_broker.topic(partitions=2)
    txn = Producer(oncelog_broker.client_config(**{"transactional.id": oncelog_broker.unique("txn")}))
    txn.init_transactions(TIMEOUT)
    txn.begin_transaction()
    for i in range(6):
        txn.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2)
    txn.commit_transaction(TIMEOUT)
    txn.begin_transaction()
    txn.produce(topic, value=b"aborted", partition=0)
    txn.abort_transaction(TIMEOUT)

    df = (spark_session.read.format("oncelog")
          .option("kafka.bootstrap.servers", oncelog_broker.bootstrap_servers)
          .option("subscribe", topic)
          .option("startingOffsets", "earliest")
          .option("endingOffsets", "latest")
          .load())
    rows = df.selectExpr("cast(key as string) k", "cast(value as string) v", "partition").collect()
    assert sorted((r.k, r.v, r.partition) for r in rows) == [(f"k{i}", f"v{i}", i % 2) for i in range(6)]
