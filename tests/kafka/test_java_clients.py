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
- a second producer with the same transactional.id continues above the last epoch;
- a transaction that outlives its transaction.timeout.ms is aborted by the coordinator with the
  epoch bump; the late commitTransaction fails with InvalidTxnStateException (Kafka's EndTxn v5
  answer INVALID_TXN_STATE: the client's epoch is the last one), the producer is then unusable,
  a new one commits at the next epoch, and the record of the aborted transaction is never read.
The per-offset layout (records and markers, their epochs relative to the first) is the same on
both brokers because it is computed from the plan.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from oncelog.tools import apache_kafka
from oncelog.client.wire import RawClient, request_module

from ..helpers import create_topic, unique
from .java.harness import (REQUEST_LOG4J, fetch_batches, java_classes, json_lines, offset_layout, sent_requests,
                           target)

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


def _transaction_state(bootstrap: str, transactional_id: str) -> str:
    """DescribeTransactions (v0) of one id at its coordinator (the only node here)."""
    m = request_module(65, 0)
    client = RawClient(bootstrap)
    try:
        [state] = client.request(m.DescribeTransactionsRequest(transactional_ids=(transactional_id,))).transaction_states
    finally:
        client.close()
    return state.transaction_state


def test_a_transaction_that_outlives_its_timeout_is_aborted_and_its_late_commit_refused(target, tmp_path):
    classes = java_classes()
    topic, txn_id = unique("java-timeout"), unique("java-outliver")
    create_topic(target.bootstrap, topic, 1)
    proceed = tmp_path / "proceed"
    proc = apache_kafka.start_tool("TransactionalClient", [
        "outlive", "--bootstrap", target.bootstrap, "--topic", topic, "--transactional-id", txn_id,
        "--transaction-timeout-ms", 1000, "--proceed-file", proceed], classpath=[classes], text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # The transaction is open once its record is acknowledged (DescribeTransactions before
        # that answers a start time of -1, which the protocol client's codec refuses to decode).
        sent = proc.stdout.readline()
        assert '"step":"send"' in sent, (sent, proc.stderr.read()[-3000:] if proc.poll() is not None else "")
        # The coordinator aborts it (Kafka checks every transaction.abort.timed.out.transaction.
        # cleanup.interval.ms, 10 s by default); then the client, still idle, tries to commit.
        deadline = time.monotonic() + 60
        while _transaction_state(target.bootstrap, txn_id) != "CompleteAbort":
            assert time.monotonic() < deadline and proc.poll() is None, "the coordinator never aborted it"
            time.sleep(0.2)
        proceed.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    steps = {line["step"]: line for line in json_lines(sent + out)}
    assert steps["commit"]["outcome"] == "InvalidTxnStateException", steps
    assert steps["abort"]["outcome"] == "KafkaException", steps  # the producer is in its fatal error state
    assert steps["next"]["producer"] == "new", steps
    layout = offset_layout(fetch_batches(target.bootstrap, topic, 0))
    e0 = layout[0][2]
    # the abort at the bumped epoch; the new producer's InitProducerId bumps again, its commit too
    assert layout == [(0, "data", e0), (1, "abort", e0 + 1), (2, "data", e0 + 2), (3, "commit", e0 + 3)], layout
    consumed = _run(classes, "consume", ["--bootstrap", target.bootstrap, "--topic", topic, "--partitions", 1,
                                         "--expected", 1, "--timeout-ms", 60000])
    assert [(r["offset"], r["value"]) for r in json_lines(consumed.stdout) if "offset" in r] == [(2, "after")]
