"""The Java client (kafka-clients 4.x, the only client with transaction version 2) against oncelog
and against Apache Kafka, the same program and the same checks on both.

A transactional producer (tests/kafka/java/TransactionalClient.java) runs a plan of committed
and aborted transactions over two partitions; a read_committed consumer in a group reads the
topic back. Invariants held on both brokers:
- the consumer reads every committed record exactly once, in offset order per partition, and no
  record of an aborted transaction;
- transaction version 2 (KIP-890 part 2) was really used: the client sent Produce v12+ and
  EndTxn v5 and never AddPartitionsToTxn (partitions join the transaction implicitly with the
  Produce), and the log, read with the project's protocol client, shows the epoch bump of every
  transaction: transaction i's records carry epoch e0 + i and its marker (COMMIT or ABORT, in
  every partition it wrote) e0 + i + 1, the epoch the coordinator bumped to at EndTxn;
- a second producer with the same transactional.id continues above the last epoch.
The per-offset layout (records and markers, their epochs relative to the first) is the same on
both brokers because it is computed from the plan.
"""

from __future__ import annotations

import pytest

from oncelog import apache_kafka

from ..helpers import create_topic
from .java.harness import (REQUEST_LOG4J, fetch_batches, java_classes, json_lines, offset_layout, sent_requests,
                           target, unique)

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]

__all__ = ["target"]  # the fixture, imported for pytest

PARTITIONS = 2
PLAN = ["commit:4", "abort:3", "commit:1", "commit:2", "abort:2", "commit:3"]


def _run(classes: str, mode: str, args: list[str], *, log4j: str | None = None, timeout: float = 120.0):
    done = apache_kafka.run_tool("TransactionalClient", [mode, *args], classpath=[classes], log4j_config=log4j,
                                 timeout=timeout)
    assert done.returncode == 0, f"TransactionalClient {mode} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return done


def _expected_layout(transactions: list[dict], partition: int, epoch0: int) -> list[tuple]:
    """The offsets of ``partition`` as transaction version 2 writes them: each transaction's
    records at epoch0 + i, then its marker at epoch0 + i + 1 (only where it wrote)."""
    out = []
    for t in transactions:
        i = t["transaction"]
        offsets = [r["offset"] for r in t["records"] if r["partition"] == partition]
        if offsets:
            out += [(o, "data", epoch0 + i) for o in offsets]
            out.append((max(offsets) + 1, t["outcome"], epoch0 + i + 1))
    return out


def test_transactional_producer_uses_transaction_version_2_and_read_committed_reads_commits_once(target, tmp_path):
    classes = java_classes()
    log4j = tmp_path / "log4j2.properties"
    log4j.write_text(REQUEST_LOG4J)
    topic, txn_id = unique("java-tv2"), unique("java-producer")
    create_topic(target.bootstrap, topic, PARTITIONS)

    produced = _run(classes, "produce", ["--bootstrap", target.bootstrap, "--topic", topic, "--partitions", PARTITIONS,
                                         "--transactional-id", txn_id, "--plan", ",".join(PLAN)], log4j=str(log4j))
    transactions = [line for line in json_lines(produced.stdout) if "transaction" in line]
    assert [f'{t["outcome"]}:{len(t["records"])}' for t in transactions] == PLAN

    # Transaction version 2 on the wire: the version the client chose from the broker's ApiVersions
    # and its finalized transaction.version feature.
    sent = sent_requests(produced.stderr)
    produce_versions = {v for (api, v) in sent if api == "PRODUCE"}
    assert produce_versions and min(produce_versions) >= 12, sent
    assert {v for (api, v) in sent if api == "END_TXN"} == {5}, sent
    assert sum(n for (api, _), n in sent.items() if api == "END_TXN") == len(PLAN), sent
    assert not any(api == "ADD_PARTITIONS_TO_TXN" for api, _ in sent), sent

    # The log: one epoch per transaction, the marker at the bumped epoch.
    layouts = {p: offset_layout(fetch_batches(target.bootstrap, topic, p)) for p in range(PARTITIONS)}
    epoch0 = layouts[0][0][2]
    for p in range(PARTITIONS):
        assert layouts[p] == _expected_layout(transactions, p, epoch0), f"partition {p} on {target.kind}"

    # A read_committed consumer in a group: the committed records once, in order; no aborted ones.
    committed = {p: [(r["offset"], r["value"]) for t in transactions if t["outcome"] == "commit"
                     for r in t["records"] if r["partition"] == p] for p in range(PARTITIONS)}
    consumed = _run(classes, "consume", ["--bootstrap", target.bootstrap, "--topic", topic, "--partitions", PARTITIONS,
                                         "--expected", sum(map(len, committed.values())), "--group", unique("java-reader"),
                                         "--timeout-ms", 60000])
    records = [line for line in json_lines(consumed.stdout) if "offset" in line]
    for p in range(PARTITIONS):
        assert [(r["offset"], r["value"]) for r in records if r["partition"] == p] == sorted(committed[p])

    # A new producer with the same transactional.id: InitProducerId bumps past the last epoch.
    again = _run(classes, "produce", ["--bootstrap", target.bootstrap, "--topic", topic, "--partitions", 1,
                                      "--transactional-id", txn_id, "--plan", "commit:1"])
    [(header, _)] = [b for b in fetch_batches(target.bootstrap, topic, 0)
                     if not b[0].is_control and b[0].base_offset == json_lines(again.stdout)[1]["records"][0]["offset"]]
    assert header.producer_epoch > epoch0 + len(PLAN), (header, epoch0)
