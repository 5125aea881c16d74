"""The Java client (kafka-clients, through the project's Apache Kafka tooling: the
TransactionalClient of tests/kafka/java) against a 2-node cluster: a transactional producer
whose coordinator is node 1 or node 2 commits and aborts over partitions led by both nodes
(with transaction version 2, the partitions join implicitly: the leaders ask the coordinator on
the other node), a Java read_committed consumer in a group coordinated by the other node reads
exactly the committed records in order, and so does an independent confluent-kafka reader.
Skips without Java/Maven (fails then under CI=true), as the other Java tests.
"""

from __future__ import annotations

import collections

import pytest

from oncelog.tools import apache_kafka

from ..helpers import create_topic, read_committed_to_end
from ..kafka.java.harness import java_classes, json_lines
from .test_transactions import find_coordinator

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]

PARTITIONS = 4
PLAN = ["commit:8", "abort:8", "commit:12", "abort:4", "commit:16", "commit:4"]


def run_java(classes: str, mode: str, args: list, timeout: float = 180.0):
    done = apache_kafka.run_tool("TransactionalClient", [mode, *map(str, args)], classpath=[classes], timeout=timeout)
    assert done.returncode == 0, f"TransactionalClient {mode} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return done


@pytest.mark.parametrize("coordinator", [1, 2])
def test_java_transactions_over_both_nodes(cluster2, coordinator):
    classes = java_classes()
    txn_id = cluster2.txn_id_on(coordinator, "java")
    group = cluster2.group_on(3 - coordinator, "java-reader")
    assert find_coordinator(cluster2.bootstrap, txn_id, 1) == coordinator
    assert find_coordinator(cluster2.bootstrap, group, 0) == 3 - coordinator
    topic = cluster2.topic_spanning(PARTITIONS, "java")
    create_topic(cluster2.bootstrap, topic, PARTITIONS)

    produced = run_java(classes, "produce", ["--bootstrap", cluster2.address(3 - coordinator), "--topic", topic,
                                             "--partitions", PARTITIONS, "--transactional-id", txn_id,
                                             "--plan", ",".join(PLAN)])
    transactions = [line for line in json_lines(produced.stdout) if "transaction" in line]
    assert [f'{t["outcome"]}:{len(t["records"])}' for t in transactions] == PLAN
    committed = {p: sorted((r["offset"], r["value"]) for t in transactions if t["outcome"] == "commit"
                           for r in t["records"] if r["partition"] == p) for p in range(PARTITIONS)}
    aborted = {r["value"] for t in transactions if t["outcome"] == "abort" for r in t["records"]}

    consumed = run_java(classes, "consume", ["--bootstrap", cluster2.address(coordinator), "--topic", topic,
                                             "--partitions", PARTITIONS, "--expected",
                                             sum(map(len, committed.values())), "--group", group,
                                             "--timeout-ms", 60000])
    records = [line for line in json_lines(consumed.stdout) if "offset" in line]
    for p in range(PARTITIONS):
        assert [(r["offset"], r["value"]) for r in records if r["partition"] == p] == committed[p], p

    values, at_end = read_committed_to_end(cluster2.bootstrap, topic, PARTITIONS)
    assert all(at_end.values()), at_end
    assert collections.Counter(v.decode() for v in values) == collections.Counter(
        v for p in range(PARTITIONS) for _o, v in committed[p])
    assert not {v.decode() for v in values} & aborted
