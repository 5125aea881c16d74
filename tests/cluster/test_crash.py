"""Crashes of a 2-node cluster in the middle of a stream of transactions (confluent-kafka):
SIGKILL of node 2's process alone (the supervisor starts it again), with the transaction
coordinator on the killed node and on the surviving one; and SIGKILL of the whole cluster
(the supervisor and, with it, every node) followed by a start on the same data directory.
An independent read_committed reader then finds every committed record exactly once, no
aborted one, and every transaction whose outcome the producer could not learn all or nothing.
"""

from __future__ import annotations

import collections
import threading
import time

import confluent_kafka as ck
import pytest

from ..helpers import create_topic, read_committed_to_end
from .conftest import Cluster

pytestmark = pytest.mark.e2e

PARTITIONS = 4
PER_PARTITION = 3


class Halted(Exception):
    """The test told the stream to stop (the cluster was killed under it)."""


class TxnStream(threading.Thread):
    """Transactions one after another over every partition of ``topic``, each ``PER_PARTITION``
    records a partition; every 5th aborted (after its records were written). Outcomes recorded
    per transaction: committed (commit_transaction returned), aborted (abort_transaction returned
    or fenced before commit), uncertain (the producer could not tell)."""

    def __init__(self, bootstrap: str, txn_id: str, topic: str, tag: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.txn_id, self.topic, self.tag = bootstrap, txn_id, topic, tag
        self.committed: list[list[bytes]] = []
        self.aborted: list[list[bytes]] = []
        self.uncertain: list[list[bytes]] = []
        self.stop_after: int | None = None  # stop once this many transactions are committed
        self.halt = threading.Event()
        self.error: BaseException | None = None
        self.new_producers = 0
        self.producer = None
        self.events: list[str] = []  # what went wrong, when (for the report of a slow or failed run)
        self.t0 = time.monotonic()

    def note(self, what) -> None:
        self.events.append(f"{time.monotonic() - self.t0:7.2f}s {self.tag}: {what}")

    def make_producer(self) -> ck.Producer:
        p = ck.Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id, "linger.ms": 2,
                         "transaction.timeout.ms": 60000, "message.timeout.ms": 60000,
                         "socket.connection.setup.timeout.ms": 3000, "reconnect.backoff.max.ms": 200})
        deadline = time.monotonic() + 90
        while True:
            if self.halt.is_set():
                raise Halted
            try:
                p.init_transactions(15)
                return p
            except ck.KafkaException as exc:
                self.note(f"init_transactions: {exc.args[0]}")
                if exc.args[0].fatal() or time.monotonic() > deadline:
                    raise
                # retriable: the coordinator is restarting; call again (librdkafka resumes it)

    def run(self) -> None:
        try:
            self._run()
        except Halted:
            pass
        except BaseException as exc:  # reported by the test
            self.error = exc

    def _run(self) -> None:
        self.producer = self.make_producer()
        t = 0
        while not self.halt.is_set() and (self.stop_after is None or len(self.committed) < self.stop_after):
            values = [b"%s-t%d-p%d-%d" % (self.tag.encode(), t, p, i)
                      for p in range(PARTITIONS) for i in range(PER_PARTITION)]
            abort = t % 5 == 4
            t += 1
            outcome = self._one(values, abort)
            {"committed": self.committed, "aborted": self.aborted, "uncertain": self.uncertain}[outcome].append(values)

    def _one(self, values: list[bytes], abort: bool) -> str:
        p = self.producer
        try:
            p.begin_transaction()
            for i, v in enumerate(values):
                p.produce(self.topic, value=v, partition=i // PER_PARTITION)
            if abort:
                deadline = time.monotonic() + 60
                while p.flush(1) > 0 and time.monotonic() < deadline:
                    if self.halt.is_set():
                        raise Halted
                return self._abort()
            return self._commit()
        except ck.KafkaException as exc:
            err = exc.args[0]
            self.note(f"in the transaction: {err}")
            if err.fatal():
                return self._replace()
            if err.txn_requires_abort():
                return self._abort()
            return self._replace()  # e.g. begin_transaction in a bad state

    def _commit(self) -> str:
        deadline = time.monotonic() + 90
        while True:
            if self.halt.is_set():
                raise Halted
            try:
                self.producer.commit_transaction(10)
                return "committed"
            except ck.KafkaException as exc:
                err = exc.args[0]
                self.note(f"commit_transaction: {err}")
                if err.fatal():
                    self._replace()
                    return "uncertain"
                if err.txn_requires_abort():
                    return self._abort()
                if time.monotonic() > deadline:
                    raise
                # retriable (timed out, coordinator restarting): call commit again

    def _abort(self) -> str:
        deadline = time.monotonic() + 90
        while True:
            if self.halt.is_set():
                raise Halted
            try:
                self.producer.abort_transaction(10)
                return "aborted"
            except ck.KafkaException as exc:
                self.note(f"abort_transaction: {exc.args[0]}")
                if exc.args[0].fatal():
                    self._replace()
                    return "aborted"  # the successor's InitProducerId aborts it
                if time.monotonic() > deadline:
                    raise

    def _replace(self) -> str:
        """A new producer with the same transactional id: its InitProducerId fences the old one
        and aborts its open transaction (nothing of it may appear)."""
        if self.halt.is_set():  # a stream of a killed cluster must not fence its successor
            raise Halted
        self.new_producers += 1
        self.note("a new producer")
        self.producer = self.make_producer()
        self.note("the new producer is ready")
        return "aborted"

    def finish(self, timeout: float = 120) -> None:
        self.join(timeout)
        assert not self.is_alive(), "the transaction stream did not finish"
        if self.error is not None:
            raise self.error


def check_committed(bootstrap: str, topic: str, streams: list[TxnStream]) -> dict:
    values, at_end = read_committed_to_end(bootstrap, topic, PARTITIONS, timeout=90)
    assert all(at_end.values()), f"an open transaction holds the last stable offset: {at_end}"
    counts = collections.Counter(values)
    dupes = {v: c for v, c in counts.items() if c > 1}
    assert dupes == {}, f"records read twice: {list(dupes.items())[:5]}"
    seen = set(values)
    known = set()
    for s in streams:
        for txn in s.committed:
            missing = [v for v in txn if v not in seen]
            assert missing == [], f"a committed transaction lost {len(missing)} record(s): {missing[:3]}"
        for txn in s.aborted:
            visible = [v for v in txn if v in seen]
            assert visible == [], f"an aborted transaction is visible: {visible[:3]}"
        for txn in s.uncertain:
            present = [v in seen for v in txn]
            assert all(present) or not any(present), f"a transaction is half visible: {txn}"
        known |= {v for txn in s.committed + s.aborted + s.uncertain for v in txn}
    assert seen <= known, f"records nobody wrote: {list(seen - known)[:3]}"
    return {"read": len(values), **{s.tag: (len(s.committed), len(s.aborted), len(s.uncertain), s.new_producers)
                                    for s in streams}}


def wait_for(what: str, check, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.02)


def test_sigkill_of_node_2_mid_transactions(cluster_factory):
    sigkill_one_node_mid_transactions(cluster_factory(2), 2)


def sigkill_one_node_mid_transactions(cluster, victim: int) -> None:
    topic = cluster.topic_spanning(PARTITIONS, "crash")
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    # one stream coordinated by the node that dies, one by the node that stays
    survivor = 3 - victim
    streams = [TxnStream(cluster.address(survivor), cluster.txn_id_on(2, "on2"), topic, "on2"),
               TxnStream(cluster.address(survivor), cluster.txn_id_on(1, "on1"), topic, "on1")]
    for s in streams:
        s.start()
    wait_for("20 transactions committed by each stream", lambda: all(len(s.committed) >= 20 for s in streams), 60)
    old = cluster.kill_node(victim)
    killed_at = time.monotonic()
    before = [len(s.committed) for s in streams]
    new = cluster.wait_registered(victim, not_pid=old, timeout=60)
    restarted_s = time.monotonic() - killed_at
    assert new != old and cluster.pid(survivor) is not None
    for s, n in zip(streams, before):
        s.stop_after = n + 20  # 20 more committed after the crash
    for s in streams:
        s.finish(180)
    finished_s = time.monotonic() - killed_at
    for s in streams:
        print("\n".join(s.events))
    summary = check_committed(cluster.address(victim), topic, streams)
    print(f"node {victim} back in {restarted_s:.1f} s, streams done {finished_s:.1f} s after the kill, "
          f"read in {time.monotonic() - killed_at - finished_s:.1f} s; {summary}")


def test_sigkill_of_node_1_the_controller_mid_transactions(cluster_factory):
    sigkill_one_node_mid_transactions(cluster_factory(2), 1)


def test_sigkill_of_the_whole_cluster_keeps_everything_acknowledged(tmp_path):
    data = str(tmp_path / "data")
    cluster = Cluster(data, 2, fsync="always").start()
    try:
        topic = cluster.topic_spanning(PARTITIONS, "whole")
        plain = cluster.topic_spanning(PARTITIONS, "plain")
        create_topic(cluster.bootstrap, topic, PARTITIONS)
        create_topic(cluster.bootstrap, plain, PARTITIONS)
        txn_ids = [cluster.txn_id_on(1, "w1"), cluster.txn_id_on(2, "w2")]
        streams = [TxnStream(cluster.bootstrap, txn_ids[0], topic, "w1"),
                   TxnStream(cluster.bootstrap, txn_ids[1], topic, "w2")]
        for s in streams:
            s.start()
        # and idempotent records outside transactions, acknowledged one by one
        acked: list[bytes] = []
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                                "linger.ms": 2, "message.timeout.ms": 5000})

        def delivered(err, msg):
            if err is None:
                acked.append(msg.value())

        i = 0
        deadline = time.monotonic() + 60
        # Until both streams committed 15 transactions and the plain producer had 100 records
        # acknowledged (the streams may get there first: its idempotent start waits for its id).
        while (not all(len(s.committed) >= 15 for s in streams) or len(acked) <= 100) \
                and time.monotonic() < deadline:
            producer.produce(plain, value=b"plain-%d" % i, partition=i % PARTITIONS, on_delivery=delivered)
            i += 1
            producer.poll(0.002)
        producer.poll(0.2)
        cluster.kill()  # the supervisor and every node, mid-stream
        for s in streams:
            s.halt.set()
        acked_at_kill = list(acked)
        committed_at_kill = [list(s.committed) for s in streams]
        assert all(len(c) >= 15 for c in committed_at_kill)
        assert len(acked_at_kill) > 100
    finally:
        cluster.process.kill()
    # The killed cluster's producers stop before it starts again: its nodes take their old ports
    # back, and a zombie producer of the same transactional id would fence the successor.
    for s in streams:
        s.join(30)
        assert not s.is_alive(), "a stream of the killed cluster did not stop"
        if s.producer is not None:
            s.producer.purge()
            s.producer = None
    producer.purge()
    del producer

    again = Cluster(data, 2, fsync="always").start()
    try:
        # what the killed producers left open is aborted by their successors' InitProducerId
        for txn_id in txn_ids:
            successor = TxnStream(again.bootstrap, txn_id, topic, "after")
            p = successor.make_producer()
            p.begin_transaction()
            p.produce(topic, value=b"after-" + txn_id.encode(), partition=0)
            p.commit_transaction(30)
        values, at_end = read_committed_to_end(again.address(2), topic, PARTITIONS, timeout=90)
        assert all(at_end.values()), at_end
        seen = collections.Counter(values)
        assert [v for v, c in seen.items() if c > 1] == []
        for committed in committed_at_kill:
            for txn in committed:
                assert all(v in seen for v in txn), "a transaction committed before the crash is lost"
        for s in streams:
            for txn in s.aborted:
                assert not any(v in seen for v in txn), "an aborted transaction is visible"
        for txn_id in txn_ids:
            assert seen[b"after-" + txn_id.encode()] == 1
        plain_values, _ = read_committed_to_end(again.bootstrap, plain, PARTITIONS, timeout=60)
        plain_counts = collections.Counter(plain_values)
        lost = [v for v in acked_at_kill if v not in plain_counts]
        assert lost == [], f"{len(lost)} acknowledged record(s) lost: {lost[:5]}"
        assert [v for v, c in plain_counts.items() if c > 1] == []
        # each partition in the order produced
        by_partition = collections.defaultdict(list)
        for v in plain_values:
            n = int(v.split(b"-")[1])
            by_partition[n % PARTITIONS].append(n)
        assert all(ns == sorted(ns) for ns in by_partition.values())
    finally:
        again.process.kill()
