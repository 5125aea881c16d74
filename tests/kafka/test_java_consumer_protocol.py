"""The Java client 4.x on the KIP-848 consumer group protocol (``group.protocol=consumer``),
consume-transform-produce exactly once through a member's SIGKILL — on oncelog and on Apache Kafka
4.4, the same program and the same checks.

Two members of one group (tests/kafka/java/ConsumerProtocolCtp.java: a read_committed
KafkaConsumer and a transactional producer, one transaction per poll with
``sendOffsetsToTransaction(offsets, consumer.groupMetadata())``) transform an input topic into an
output topic. The second member joins while the first works (an incremental rebalance: the first
gives up partitions without stopping), then the first is SIGKILLed, mostly inside a transaction
(its members pace inside each transaction). The second gets the dead member's partitions when its
session expires (a group config of 6 s on both brokers) and finishes the input. Checked:
- an independent read_committed reader finds every input record in the output exactly once;
- the group's committed offsets are the input's end offsets;
- the Java client really used the new protocol (ConsumerGroupHeartbeat sent, never JoinGroup or
  SyncGroup) and committed offsets in transactions (TxnOffsetCommit sent, never OffsetCommit);
- the surviving member's member epoch grew past the one it joined with (it was reassigned).
"""

from __future__ import annotations

import collections
import os
import signal
import time

import confluent_kafka as ck
import pytest

from oncelog.tools import apache_kafka

from .. import consumer_protocol_cases as cases
from ..helpers import create_topic, unique
from .java.harness import REQUEST_LOG4J, java_classes, json_lines, sent_requests, target

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]

__all__ = ["target"]  # the fixture, imported for pytest

PARTITIONS = 4
RECORDS = 300
TIMING = cases.Timing(session_timeout_ms=6000, heartbeat_interval_ms=500)


class JavaMember:
    """One ConsumerProtocolCtp process; its stdout and stderr (the request log) in files."""

    def __init__(self, classes: str, log4j: str, workdir, name: str, args: list[str]) -> None:
        self.name = name
        self.out_path, self.err_path = workdir / f"{name}.out", workdir / f"{name}.err"
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = apache_kafka.start_tool("ConsumerProtocolCtp", args, classpath=[classes], log4j_config=log4j,
                                                stdout=out, stderr=err)

    def lines(self) -> list[dict]:
        return json_lines(self.out_path.read_text())

    def committed(self) -> list[dict]:
        return [line for line in self.lines() if "txn" in line]

    def stderr(self) -> str:
        return self.err_path.read_text()

    def wait_for(self, what: str, predicate, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert self.proc.poll() is None or predicate(), (
                f"{self.name} exited {self.proc.returncode} before {what}:\n{self.stderr()[-3000:]}")
            assert time.monotonic() < deadline, f"{self.name}: no {what} in {timeout:.0f} s: {self.lines()[-5:]}"
            time.sleep(0.1)


def _produce_input(bootstrap: str, topic: str) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(RECORDS):
        p.produce(topic, key=f"k{i}", value=f"v{i}", partition=i % PARTITIONS)
    assert p.flush(30) == 0


def _read_committed(bootstrap: str, topic: str, timeout: float = 90.0) -> list[str]:
    """Every record of ``topic`` a read_committed reader gets once no transaction is open: it
    reads until its position is the high watermark in every partition (the LSO has reached it:
    the killed member's transaction was aborted by the coordinator)."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("j848-reader"), "enable.auto.commit": False,
                     "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    parts = [ck.TopicPartition(topic, p, 0) for p in range(PARTITIONS)]
    c.assign(parts)
    got: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            for m in c.consume(1000, 0.5):
                assert not m.error(), m.error()
                got.append(m.value().decode())
            positions = {tp.partition: tp.offset for tp in c.position(parts)}
            highs = {p: c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
            if len(got) >= RECORDS and all(positions[p] >= highs[p] for p in range(PARTITIONS)):
                return got
            assert time.monotonic() < deadline, f"read {len(got)} of {RECORDS}; positions {positions}, highs {highs}"
    finally:
        c.close()


def test_java_members_on_the_consumer_protocol_transform_exactly_once_through_a_kill(target, tmp_path):
    classes = java_classes()
    log4j = tmp_path / "log4j2.properties"
    log4j.write_text(REQUEST_LOG4J)
    src, dst, group = unique("j848-in"), unique("j848-out"), unique("j848-group")
    create_topic(target.bootstrap, src, PARTITIONS)
    create_topic(target.bootstrap, dst, PARTITIONS)
    cases.kafka_group_configurer(target.bootstrap)(group, TIMING)  # a GROUP config on both brokers
    _produce_input(target.bootstrap, src)

    def member(name: str, *extra: str) -> JavaMember:
        return JavaMember(classes, str(log4j), tmp_path, name,
                          ["--bootstrap", target.bootstrap, "--input", src, "--output", dst, "--group", group,
                           "--transactional-id", unique(f"j848-{name}"), "--max-poll-records", "5", *extra])

    # The first member paces slowly (5 records per half second), so that however long the second
    # takes to start and join on a loaded machine, the partitions the first keeps still hold input
    # at the kill: the second member's reassignment shows as a commit at a later member epoch.
    first = member("first", "--pace-ms", "500", "--timeout-ms", "120000")
    second = None
    try:
        first.wait_for("first transaction", lambda: first.committed())
        second = member("second", "--pace-ms", "20", "--until-done", "true", "--timeout-ms", "150000")
        second.wait_for("first transaction", lambda: second.committed())
        assert not any("end" in line for line in first.lines()), "the first member finished before the kill"
        done = sum(line["records"] for line in first.committed() + second.committed())
        assert done < RECORDS - 2 * 5, f"the input was nearly done ({done} of {RECORDS}) before the kill"
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(timeout=30)
        assert second.proc.wait(timeout=150) == 0, second.stderr()[-4000:]
    finally:
        for m in (first, second):
            if m is not None and m.proc.poll() is None:
                m.proc.kill()
                m.proc.wait(timeout=30)

    # Exactly once: every input value in the output once, nothing else.
    out = collections.Counter(_read_committed(target.bootstrap, dst))
    assert out == collections.Counter(f"v{i}" for i in range(RECORDS)), (
        f"missing {sorted(set(f'v{i}' for i in range(RECORDS)) - set(out))[:10]}, "
        f"twice {[v for v, n in out.items() if n > 1][:10]}, on {target.kind}")

    # The group committed the whole input (through transactions only).
    admin = ck.admin.AdminClient({"bootstrap.servers": target.bootstrap})
    [listed] = admin.list_consumer_group_offsets([ck.ConsumerGroupTopicPartitions(group)]).values()
    committed = {tp.partition: tp.offset for tp in listed.result(timeout=30).topic_partitions if tp.topic == src}
    assert committed == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}, committed

    # The new protocol on the wire, by both members; offsets only inside transactions.
    for m in (first, second):
        sent = sent_requests(m.stderr())
        apis = {api for api, _ in sent}
        assert "CONSUMER_GROUP_HEARTBEAT" in apis and "TXN_OFFSET_COMMIT" in apis, (m.name, sent)
        assert not apis & {"JOIN_GROUP", "SYNC_GROUP", "OFFSET_COMMIT"}, (m.name, sent)
    epochs = [line["epoch"] for line in second.committed()]
    assert epochs[-1] > epochs[0], f"the second member was never reassigned: epochs {epochs[0]}..{epochs[-1]}"
    # What the members say they committed cannot exceed the input (a kill may hide its last line).
    assert sum(line["records"] for line in first.committed() + second.committed()) <= RECORDS
