"""The log cleaner and transactions, at the storage level: committed transactions are
compacted like other records, aborted ones removed, undecided ones kept whole and superseding
nothing, markers kept while their transaction has a batch left and then for delete.retention.ms
— Kafka's LogCleaner. Checked on hand-made logs and on random ones against what a read_committed
reader sees before and after cleaning; and on a real broker, a compacted topic written one
transaction at a time (a query's commit log) stays the size of its keys."""

from __future__ import annotations

import os
import random
import time

import pytest

from oncelog.config.settings import LogConfig
from oncelog.protocol import records as rb
from oncelog.storage.cleaner import compact
from oncelog.storage.partition_log import PartitionLog

DAY = 24 * 3600 * 1000


def open_log(path, **config) -> PartitionLog:
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=config.pop("segment_bytes", 400), **config)
    return PartitionLog.open(str(path), "t", 0, cfg, sync_hw=False, recovery_point=None, clean_shutdown=False)


class Writer:
    """Appends batches to a log: plain records, transactional ones of a producer, markers."""

    def __init__(self, plog: PartitionLog, ts: int = 1000) -> None:
        self.plog, self.ts = plog, ts

    def _append(self, raw: bytes) -> None:
        buf = bytearray(raw)
        self.plog.append(buf, rb.scan_batches(bytes(buf)), self.ts)
        self.ts += 1

    def put(self, key: bytes, value: bytes | None) -> None:
        self._append(rb.build_batch([(key, value)], timestamp_ms=self.ts))

    def txn_put(self, pid: int, key: bytes, value: bytes | None) -> None:
        self._append(rb.build_batch([(key, value)], timestamp_ms=self.ts, producer_id=pid, producer_epoch=0,
                                    base_sequence=0, attributes=rb.ATTR_TRANSACTIONAL))

    def marker(self, pid: int, commit: bool) -> None:
        self._append(rb.build_control_batch(pid, 0, commit, 0, self.ts))


def flush(plog: PartitionLog) -> None:
    segments, offset = plog.take_flush_work()
    for seg in segments:
        seg.flush()
    plog.flushed(offset)


def batches(plog: PartitionLog):
    """(header, [(offset, key, value)]) of every batch, in offset order."""
    out = []
    for seg in plog.segments:
        for pos, h in seg.iter_headers(0):
            out.append((h, [(o, k, v) for o, _, k, v in rb.iter_records(seg.read(pos, h.size))]))
    return out


def read_committed(plog: PartitionLog) -> dict[bytes, bytes | None]:
    """What a read_committed reader ends with per key (tombstones as None): the records below
    the last stable offset (the first offset of a transaction with no marker yet), in offset
    order, without those of aborted transactions."""
    found = batches(plog)
    outcome: dict[int, bool] = {}  # index of a transactional batch -> committed
    open_txn: dict[int, list[int]] = {}
    for i, (h, recs) in enumerate(found):
        if h.is_control:
            commit = int.from_bytes(recs[0][1][2:4], "big") == rb.CONTROL_COMMIT
            for j in open_txn.pop(h.producer_id, []):
                outcome[j] = commit
        elif h.is_transactional:
            open_txn.setdefault(h.producer_id, []).append(i)
    stable = min((found[ids[0]][0].base_offset for ids in open_txn.values()), default=None)
    state: dict[bytes, bytes | None] = {}
    for i, (h, recs) in enumerate(found):
        if stable is not None and h.base_offset >= stable:
            break
        if h.is_control or (h.is_transactional and not outcome[i]):
            continue
        for _, k, v in recs:
            state[k] = v
    return state


def kinds(plog: PartitionLog) -> list[str]:
    """Each batch as 'k=v' (plain), 'pid:k=v' (transactional), 'C pid' / 'A pid' (markers)."""
    out = []
    for h, recs in batches(plog):
        if h.is_control:
            out.append(f"{'C' if int.from_bytes(recs[0][1][2:4], 'big') == rb.CONTROL_COMMIT else 'A'} {h.producer_id}")
        else:
            out += [f"{f'{h.producer_id}:' if h.is_transactional else ''}{k.decode()}={v.decode() if v else None}"
                    for _, k, v in recs]
    return out


def roll(w: Writer, n: int = 8) -> None:
    """Plain writes of another key, so the batches before them are in closed segments."""
    for i in range(n):
        w.put(b"filler", b"x" * 60 + str(i).encode())


def test_a_commit_log_written_one_transaction_at_a_time_keeps_its_last_decision_and_marker(tmp_path):
    plog = open_log(tmp_path)
    w = Writer(plog)
    for i in range(30):  # a query's decisions: one transaction each, one key
        w.txn_put(7, b"query", f"decision-{i}".encode())
        w.marker(7, commit=True)
    roll(w)
    flush(plog)
    before = read_committed(plog)
    assert compact(plog, now_ms=w.ts + DAY, delete_retention_ms=DAY) > 0
    # the last decision and its marker; the other markers are past delete.retention.ms
    assert [k for k in kinds(plog) if "query" in k or k.startswith("C")] == ["7:query=decision-29", "C 7"]
    assert read_committed(plog) == before


def test_markers_of_transactions_with_nothing_left_stay_for_delete_retention(tmp_path):
    plog = open_log(tmp_path)
    w = Writer(plog)
    for i in range(5):
        w.txn_put(7, b"query", f"decision-{i}".encode())
        w.marker(7, commit=True)
    roll(w)
    flush(plog)
    compact(plog, now_ms=w.ts, delete_retention_ms=DAY)  # young markers stay
    assert [k for k in kinds(plog) if not k.startswith("filler")] == ["C 7"] * 4 + ["7:query=decision-4", "C 7"]


def test_an_aborted_transaction_is_removed_and_supersedes_nothing(tmp_path):
    plog = open_log(tmp_path)
    w = Writer(plog)
    w.put(b"k", b"plain")
    w.txn_put(7, b"k", b"aborted")
    w.txn_put(7, b"j", b"aborted")
    w.marker(7, commit=False)
    roll(w)
    flush(plog)
    compact(plog, now_ms=w.ts, delete_retention_ms=DAY)
    assert kinds(plog)[:2] == ["k=plain", "A 7"]  # the abort marker stays for delete.retention.ms
    compact(plog, now_ms=w.ts + DAY, delete_retention_ms=DAY)
    assert kinds(plog)[0] == "k=plain" and "A 7" not in kinds(plog)
    assert read_committed(plog)[b"k"] == b"plain" and b"j" not in read_committed(plog)


def test_an_undecided_transaction_is_kept_whole_until_its_marker(tmp_path):
    plog = open_log(tmp_path)
    w = Writer(plog)
    w.txn_put(7, b"k", b"committed")
    w.marker(7, commit=True)
    w.txn_put(8, b"k", b"open")  # undecided: may still abort
    roll(w)
    flush(plog)
    compact(plog, now_ms=w.ts + DAY, delete_retention_ms=DAY)
    assert [k for k in kinds(plog) if not k.startswith("filler")] == ["7:k=committed", "C 7", "8:k=open"]
    w.marker(8, commit=True)  # in the active segment: it decides the batch in a closed one
    compact(plog, now_ms=w.ts + DAY, delete_retention_ms=DAY)
    assert [k for k in kinds(plog) if not k.startswith("filler")] == ["8:k=open", "C 8"]
    assert read_committed(plog)[b"k"] == b"open"


@pytest.mark.parametrize("seed", range(12))
def test_random_logs_read_the_same_committed_values_after_cleaning(tmp_path, seed):
    # Plain writes, transactions of three producers (committed, aborted, one left open), tombstones:
    # a read_committed reader ends with the same value per key before and after every cleaning,
    # and once everything is decided and old, one batch per live key and the markers of kept
    # transactions are all that is left.
    rnd = random.Random(seed)
    plog = open_log(tmp_path, segment_bytes=rnd.choice([300, 700, 2000]))
    w = Writer(plog)
    open_pids: set[int] = set()
    keys = [f"k{i}".encode() for i in range(6)]
    for step in range(300):
        action = rnd.random()
        value = None if rnd.random() < 0.1 else f"v{step}".encode()
        if action < 0.3:
            w.put(rnd.choice(keys), value)
        elif action < 0.8:
            pid = rnd.choice([1, 2, 3])
            w.txn_put(pid, rnd.choice(keys), value)
            open_pids.add(pid)
        elif open_pids:
            pid = rnd.choice(sorted(open_pids))
            w.marker(pid, commit=rnd.random() < 0.7)
            open_pids.discard(pid)
        if step % 50 == 49:
            flush(plog)
            before = read_committed(plog)
            compact(plog, now_ms=w.ts, delete_retention_ms=rnd.choice([0, DAY]))
            assert read_committed(plog) == {k: v for k, v in before.items()
                                            if v is not None or k in read_committed(plog)}
    for pid in sorted(open_pids):
        w.marker(pid, commit=True)
    roll(w, 20)
    flush(plog)
    expected = read_committed(plog)
    compact(plog, now_ms=w.ts + DAY, delete_retention_ms=DAY)
    compact(plog, now_ms=w.ts + DAY, delete_retention_ms=DAY)
    closed_kinds = []
    for seg in plog.segments[:-1]:
        for pos, h in seg.iter_headers(0):
            closed_kinds.append(h.is_control)
    assert read_committed(plog) == {k: v for k, v in expected.items() if v is not None}
    data_batches = closed_kinds.count(False)
    assert data_batches <= len(keys) + 1  # one per live key (and the filler)
    assert closed_kinds.count(True) <= data_batches  # only markers of transactions with a batch left


def test_a_compacted_topic_written_in_transactions_stays_the_size_of_its_keys(broker_factory):
    # The Spark sink's commit log: decisions written one transaction each under one key per query,
    # on a compacted topic. Up to 802c6e8 oncelog's cleaner kept every transactional batch and
    # marker: the topic grew by ~250 bytes a decision, for good.
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    b = broker_factory(extra_args=["--log-cleaner-interval-ms", "200", "--fsync", "never",
                                   "--override", "log.cleaner.delete.retention.ms=500"])
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("commits", 1, 1, config={
        "cleanup.policy": "compact", "internal.segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.1"})])[
        "commits"].result(30)
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "decider", "linger.ms": 0})
    p.init_transactions(30)
    for i in range(200):
        p.begin_transaction()
        p.produce("commits", key=f"query-{i % 2}".encode(), value=b"d" * 100 + str(i).encode(), partition=0)
        p.commit_transaction(30)
    directory = os.path.join(b.data_dir, "commits-0")

    def size() -> int:
        return sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory) if n.endswith(".log"))

    # 200 transactions wrote ~50 KB (a ~170-byte batch and a 78-byte marker each). The query goes
    # on deciding (a cleaning pass needs new data: min.cleanable.dirty.ratio), and what the
    # cleaner leaves is the last decisions, their markers and the markers of the last 0.5 s.
    deadline, i = time.monotonic() + 60, 200
    while size() > 8192 + 4096 and time.monotonic() < deadline:
        p.begin_transaction()
        p.produce("commits", key=f"query-{i % 2}".encode(), value=b"d" * 100 + str(i).encode(), partition=0)
        p.commit_transaction(30)
        i += 1
        time.sleep(0.05)
    assert size() <= 8192 + 4096, size()
    c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "r", "isolation.level": "read_committed",
                     "enable.auto.commit": False})
    c.assign([ck.TopicPartition("commits", 0, 0)])
    latest, deadline = {}, time.monotonic() + 30
    while time.monotonic() < deadline and b"d" * 100 + str(i - 1).encode() not in latest.values():
        m = c.poll(0.2)
        if m is not None and not m.error():
            latest[m.key()] = m.value()
    c.close()
    assert latest == {f"query-{j % 2}".encode(): b"d" * 100 + str(j).encode() for j in (i - 2, i - 1)}
