"""Fetch and ListOffsets: both isolation levels around open, committed and aborted transactions
(high watermark, last stable offset, aborted transaction lists), offsets at and beyond the log
end, the log start after DeleteRecords, byte limits, unknown topics and partitions, the special
ListOffsets timestamps, and each version's answer.

A transaction's markers are written after EndTxn is answered, on both brokers: every scenario
that reads after an EndTxn first waits for the coordinator to finish
(:meth:`Conversation.wait_txn_complete`) or for the partition to be stable.
"""

from __future__ import annotations

import datetime
import struct
import time
import uuid

import crc32c

from oncelog.protocol import records as rb

from .framework import (DELETE_RECORDS, EARLIEST, FETCH, LATEST, LIST_OFFSETS, READ_COMMITTED, READ_UNCOMMITTED,
                        batch, mod, scenario)
from .scenarios_transactions import begin, end, txn_batch

MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -3, -4, -5


def _make(cls, **kw):
    """``cls`` from a superset of its fields (each version's class keeps those it has)."""
    fields = cls.__dataclass_fields__
    return cls(**{k_: v for k_, v in kw.items() if k_ in fields})


def fetch_many(k, parts, *, isolation_level=READ_UNCOMMITTED, max_bytes=50 << 20, partition_max_bytes=1 << 20,
               version=12, topic_ids: dict | None = None):
    """One Fetch of [(topic, partition, offset), ...] at any version; v13+ names topics by
    ``topic_ids[topic]``."""
    m = mod(FETCH, version)
    by_topic: dict[str, list] = {}
    for topic, partition, offset in parts:
        by_topic.setdefault(topic, []).append(_make(
            m.FetchPartition, partition=partition, current_leader_epoch=-1, fetch_offset=offset,
            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=partition_max_bytes))
    topics = tuple(_make(m.FetchTopic, topic_id=topic_ids[t] if version >= 13 else None, topic=t,
                         partitions=tuple(ps)) for t, ps in by_topic.items())
    kw = dict(replica_id=-1, max_wait=datetime.timedelta(milliseconds=0), min_bytes=0, max_bytes=max_bytes,
              isolation_level=isolation_level, session_id=0, session_epoch=-1, topics=topics,
              forgotten_topics_data=(), rack_id="", cluster_id=None)
    if version >= 15:
        kw["replica_state"] = m.ReplicaState(replica_id=-1, replica_epoch=-1)
    return k.send(_make(m.FetchRequest, **kw))


def fetch_v(k, topic, offset=0, *, version, partition=0, isolation_level=READ_UNCOMMITTED):
    return fetch_many(k, [(topic, partition, offset)], version=version, isolation_level=isolation_level)


def topic_id(k, topic):
    return k.metadata([topic]).topics[0].topic_id


def delete_records(k, topic, offset, partition=0):
    m = mod(DELETE_RECORDS, 2)
    return k.send(m.DeleteRecordsRequest(topics=(m.DeleteRecordsTopic(name=topic, partitions=(
        m.DeleteRecordsPartition(partition_index=partition, offset=offset),)),),
        timeout=datetime.timedelta(seconds=30)))


def list_offsets_v(k, topic, timestamp, *, version, partition=0, isolation_level=READ_UNCOMMITTED):
    """ListOffsets at any version (v0's max_num_offsets and v10's timeout as their defaults)."""
    m = mod(LIST_OFFSETS, version)
    part_fields = m.ListOffsetsPartition.__dataclass_fields__
    pkw = dict(partition_index=partition, current_leader_epoch=-1, timestamp=timestamp, max_num_offsets=1)
    kw = dict(replica_id=-1, isolation_level=isolation_level, timeout=datetime.timedelta(seconds=30),
              topics=(m.ListOffsetsTopic(name=topic, partitions=(m.ListOffsetsPartition(
                  **{k_: v for k_, v in pkw.items() if k_ in part_fields}),)),))
    fields = m.ListOffsetsRequest.__dataclass_fields__
    return k.send(m.ListOffsetsRequest(**{k_: v for k_, v in kw.items() if k_ in fields}))


def three_batches(k, base="t", **config):
    """A topic with batches [a,b,c], [d], [e,f] (offsets 0-2, 3, 4-5)."""
    t = k.create_topic(base, configs=config or None)
    for values in ([b"a", b"b", b"c"], [b"d"], [b"e", b"f"]):
        k.produce(t, batch(values))
    return t


def open_txn(k, t, values=(b"x",), *, partitions=(0,), tid_base="tx"):
    """Plain record p0, then an open transaction writing ``values``: returns (tid, pid, epoch)."""
    k.produce(t, batch([b"p0"]))
    tid, pid, epoch = begin(k, tid_base, {t: list(partitions)})
    k.produce(t, txn_batch(values, pid, epoch, 0), transactional_id=tid)
    return tid, pid, epoch


# ---------------------------------------------------------------------- fetch: offsets


@scenario("fetch")
def empty_partition(k):
    """Fetch offset 0 of an empty partition: no records, high watermark 0."""
    return k.fetch(k.create_topic("t"))


@scenario("fetch")
def at_high_watermark(k):
    """Fetch at the high watermark: no records, no error."""
    t = three_batches(k)
    return k.fetch(t, 6)


@scenario("fetch")
def beyond_high_watermark(k):
    """Fetch one past the high watermark: OFFSET_OUT_OF_RANGE."""
    t = three_batches(k)
    return k.fetch(t, 7)


@scenario("fetch")
def negative_offset(k):
    """Fetch offset -1: OFFSET_OUT_OF_RANGE."""
    t = three_batches(k)
    return k.fetch(t, -1)


@scenario("fetch")
def middle_of_batch(k):
    """Fetch offset 1, inside the first batch: the whole batch comes back (offsets 0-2) and the rest."""
    t = three_batches(k)
    return k.fetch(t, 1)


@scenario("fetch")
def last_batch_only(k):
    """Fetch offset 5, the last record of the last batch: that whole batch."""
    t = three_batches(k)
    return k.fetch(t, 5)


@scenario("fetch")
def after_delete_records(k):
    """DeleteRecords to offset 4, then Fetch at 4: log_start_offset 4, the batch holding 4 returned whole."""
    t = three_batches(k)
    return [delete_records(k, t, 4), k.fetch(t, 4)]


@scenario("fetch")
def below_log_start(k):
    """DeleteRecords to offset 3, then Fetch at 0: OFFSET_OUT_OF_RANGE with log_start_offset 3."""
    t = three_batches(k)
    return [delete_records(k, t, 3), k.fetch(t, 0)]


@scenario("fetch")
def delete_records_to_end(k):
    """DeleteRecords to the high watermark (-1): log start = HWM, a Fetch there is empty."""
    t = three_batches(k)
    return [delete_records(k, t, -1), k.fetch(t, 6)]


@scenario("fetch")
def delete_records_beyond_end(k):
    """DeleteRecords past the high watermark: OFFSET_OUT_OF_RANGE, nothing deleted."""
    t = three_batches(k)
    return [delete_records(k, t, 9), k.fetch(t, 0)]


# ---------------------------------------------------------------------- fetch: byte limits


@scenario("fetch")
def max_bytes_smaller_than_first_batch(k):
    """max_bytes=10: the first batch is returned whole all the same (KIP-74)."""
    t = three_batches(k)
    return k.fetch(t, 0, max_bytes=10)


@scenario("fetch")
def partition_max_bytes_smaller_than_first_batch(k):
    """partition_max_bytes=10: the first batch whole all the same."""
    t = three_batches(k)
    return k.fetch(t, 0, partition_max_bytes=10)


@scenario("fetch", differs="by design: oncelog answers whole batches only (docs/broker.md's API table: Fetch 'whole "
                           "batches'); Kafka fills max_bytes with the start of the next batch, which consumers drop")
def max_bytes_between_batches(k):
    """A limit of one batch and a half: what comes after the first batch."""
    t = k.create_topic("t")
    for i in range(4):
        k.produce(t, batch([b"%d" % i * 50]))
    size = len(batch([b"0" * 50]))
    return [k.fetch(t, 0, max_bytes=size + size // 2), k.fetch(t, 0, partition_max_bytes=size + size // 2)]


@scenario("fetch", cluster_differs="by design: on a two-node cluster the two partitions have two leaders, and a "
          "client fetches each from its own, max_bytes applying to each request (as on a Kafka cluster): the "
          "second partition's batch comes back too")
def max_bytes_across_partitions(k):
    """Two partitions, max_bytes below both: the first partition's first batch only, the second empty."""
    t = k.create_topic("t", partitions=2)
    for p in (0, 1):
        k.produce(t, [(p, batch([b"x" * 100]))])
    return fetch_many(k, [(t, 0, 0), (t, 1, 0)], max_bytes=10)


# ---------------------------------------------------------------------- fetch: topics and partitions


@scenario("fetch")
def unknown_topic(k):
    """Fetch (v12, by name) of a topic that does not exist."""
    return k.fetch(k.name("missing"))


@scenario("fetch")
def unknown_partition(k):
    """Fetch of partition 3 of a one-partition topic."""
    return k.fetch(k.create_topic("t"), partition=3)


@scenario("fetch")
def multiple_partitions(k):
    """One Fetch of three partitions at different offsets, one empty."""
    t = k.create_topic("t", partitions=3)
    k.produce(t, [(0, batch([b"a", b"b"])), (1, batch([b"c"]))])
    return fetch_many(k, [(t, 0, 1), (t, 1, 0), (t, 2, 0)])


@scenario("fetch")
def known_and_unknown_topic(k):
    """One Fetch of an existing partition and one of a missing topic."""
    t = k.create_topic("t")
    k.produce(t, batch([b"a"]))
    return fetch_many(k, [(t, 0, 0), (k.name("missing"), 0, 0)])


@scenario("fetch")
def by_topic_id_v13(k):
    """Fetch v13 by the topic id Metadata gives."""
    t = three_batches(k)
    return fetch_many(k, [(t, 0, 3)], version=13, topic_ids={t: topic_id(k, t)})


@scenario("fetch")
def unknown_topic_id_v13(k):
    """Fetch v13 of a topic id no topic has: UNKNOWN_TOPIC_ID."""
    return fetch_many(k, [("x", 0, 0)], version=13, topic_ids={"x": uuid.uuid4()})


@scenario("fetch")
def by_topic_id_v16(k):
    """Fetch v16 (node endpoints) by topic id."""
    t = three_batches(k)
    return fetch_many(k, [(t, 0, 0)], version=16, topic_ids={t: topic_id(k, t)})


@scenario("fetch")
def min_bytes_wait(k):
    """min_bytes above what is there with max_wait 200 ms: answered after the wait with what there is."""
    t = three_batches(k)
    m = mod(FETCH, 12)
    return k.send(m.FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(milliseconds=200), min_bytes=1 << 20, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1, topics=(m.FetchTopic(topic=t, partitions=(
            m.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=3, last_fetched_epoch=-1,
                             log_start_offset=-1, partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=(), rack_id=""))


@scenario("fetch")
def no_partition_answered_at_once(k):
    """A Fetch naming no partition (a Java consumer closing its fetch session), min_bytes 1, max_wait 5 s: answered at once."""
    m = mod(FETCH, 12)
    started = time.monotonic()
    resp = k.send(m.FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(seconds=5), min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, topics=(), forgotten_topics_data=(), rack_id=""))
    return {"answered_before_max_wait": time.monotonic() - started < 2.5, "response": resp}


# ---------------------------------------------------------------------- fetch: transactions


@scenario("fetch")
def open_txn_read_uncommitted(k):
    """An open transaction, read_uncommitted: its records visible, LSO at its first offset."""
    t = k.create_topic("t")
    open_txn(k, t, (b"x", b"y"))
    return k.fetch(t, isolation_level=READ_UNCOMMITTED)


@scenario("fetch")
def open_txn_read_committed(k):
    """An open transaction, read_committed: records up to the LSO only, no aborted list entries."""
    t = k.create_topic("t")
    open_txn(k, t, (b"x", b"y"))
    return k.fetch(t, isolation_level=READ_COMMITTED)


@scenario("fetch")
def open_txn_read_committed_at_lso(k):
    """read_committed Fetch at the LSO of an open transaction: nothing yet, no error."""
    t = k.create_topic("t")
    open_txn(k, t)
    return k.fetch(t, 1, isolation_level=READ_COMMITTED)


@scenario("fetch")
def committed_txn_read_committed(k):
    """A committed transaction, read_committed: its records and the COMMIT marker, no aborted list."""
    t = k.create_topic("t")
    tid, pid, epoch = open_txn(k, t, (b"x", b"y"))
    end(k, tid, pid, epoch, True)
    return k.fetch(t, isolation_level=READ_COMMITTED)


@scenario("fetch")
def aborted_txn_read_committed(k):
    """An aborted transaction, read_committed: records, ABORT marker, aborted_transactions [(pid, 1)]."""
    t = k.create_topic("t")
    tid, pid, epoch = open_txn(k, t, (b"x", b"y"))
    end(k, tid, pid, epoch, False)
    return k.fetch(t, isolation_level=READ_COMMITTED)


@scenario("fetch")
def aborted_txn_read_uncommitted(k):
    """An aborted transaction, read_uncommitted: every record, aborted_transactions null."""
    t = k.create_topic("t")
    tid, pid, epoch = open_txn(k, t, (b"x", b"y"))
    end(k, tid, pid, epoch, False)
    return k.fetch(t, isolation_level=READ_UNCOMMITTED)


@scenario("fetch")
def aborted_txn_fetched_after_it(k):
    """read_committed Fetch starting after an aborted transaction's marker: no aborted list entry for it."""
    t = k.create_topic("t")
    tid, pid, epoch = open_txn(k, t, (b"x",))
    end(k, tid, pid, epoch, False)
    k.produce(t, batch([b"after"]))
    return k.fetch(t, 3, isolation_level=READ_COMMITTED)


@scenario("fetch")
def two_aborted_one_committed(k):
    """Abort, commit, abort by one producer: read_committed lists both aborted ranges."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    seq = 0
    for n, commit in enumerate((False, True, False)):
        if n:
            k.add_partitions_to_txn(tid, pid, epoch, {t: [0]})
        k.produce(t, txn_batch([b"r%d" % n], pid, epoch, seq), transactional_id=tid)
        seq += 1
        end(k, tid, pid, epoch, commit)
    return k.fetch(t, isolation_level=READ_COMMITTED)


@scenario("fetch")
def two_producers_open_and_aborted(k):
    """One producer's aborted transaction, another's still open: LSO at the open one, one aborted entry."""
    t = k.create_topic("t")
    tid1, pid1, e1 = begin(k, "tx1", {t: [0]})
    k.produce(t, txn_batch([b"a1"], pid1, e1, 0), transactional_id=tid1)
    tid2, pid2, e2 = begin(k, "tx2", {t: [0]})
    k.produce(t, txn_batch([b"b1"], pid2, e2, 0), transactional_id=tid2)
    end(k, tid1, pid1, e1, False)
    return [k.fetch(t, isolation_level=READ_COMMITTED), k.fetch(t, isolation_level=READ_UNCOMMITTED)]


@scenario("fetch")
def aborted_txn_read_committed_v4(k):
    """Fetch v4 read_committed after an abort: the aborted list in v4's shape."""
    t = k.create_topic("t")
    tid, pid, epoch = open_txn(k, t, (b"x",))
    end(k, tid, pid, epoch, False)
    return fetch_v(k, t, isolation_level=READ_COMMITTED, version=4)


# ---------------------------------------------------------------------- fetch: versions


def _fetch_version(v: int):
    def fn(k):
        t = three_batches(k)
        return [fetch_v(k, t, 1, version=v), fetch_v(k, t, 9, version=v), fetch_v(k, k.name("missing"), version=v)]

    fn.__name__ = f"version_v{v}"
    fn.__doc__ = f"Fetch v{v}: from inside a batch, beyond the end, an unknown topic (the fields v{v} has)."
    scenario("fetch")(fn)


for _v in range(4, 13):
    _fetch_version(_v)


def _fetch_version_by_id(v: int):
    def fn(k):
        t = three_batches(k)
        ids = {t: topic_id(k, t), "x": uuid.UUID(int=12345)}
        return [fetch_many(k, [(t, 0, 1)], version=v, topic_ids=ids), fetch_many(k, [(t, 0, 9)], version=v, topic_ids=ids),
                fetch_many(k, [("x", 0, 0)], version=v, topic_ids=ids)]

    fn.__name__ = f"version_v{v}"
    fn.__doc__ = (f"Fetch v{v} by topic id: from inside a batch, beyond the end, an unknown id "
                  f"(the fields v{v} has).")
    scenario("fetch")(fn)


for _v in range(13, 19):
    _fetch_version_by_id(_v)


# ---------------------------------------------------------------------- list_offsets


@scenario("list_offsets")
def earliest_latest_empty(k):
    """EARLIEST and LATEST of an empty partition: both 0."""
    t = k.create_topic("t")
    return [k.list_offsets(t, EARLIEST), k.list_offsets(t, LATEST)]


@scenario("list_offsets")
def earliest_latest(k):
    """EARLIEST 0 and LATEST 6 after three batches."""
    t = three_batches(k)
    return [k.list_offsets(t, EARLIEST), k.list_offsets(t, LATEST)]


@scenario("list_offsets")
def earliest_after_delete_records(k):
    """EARLIEST after DeleteRecords to 4: 4."""
    t = three_batches(k)
    delete_records(k, t, 4)
    return [k.list_offsets(t, EARLIEST), k.list_offsets(t, LATEST)]


@scenario("list_offsets")
def max_timestamp(k):
    """MAX_TIMESTAMP (-3, v7): the offset of the record with the largest timestamp."""
    t = k.create_topic("t")
    now = int(time.time() * 1000)
    for ts, v in ((now - 3000, b"a"), (now - 1000, b"b"), (now - 2000, b"c")):
        k.produce(t, batch([v], timestamp_ms=ts))
    return k.list_offsets(t, MAX_TIMESTAMP, version=7)


@scenario("list_offsets")
def max_timestamp_empty(k):
    """MAX_TIMESTAMP of an empty partition."""
    return k.list_offsets(k.create_topic("t"), MAX_TIMESTAMP, version=7)


@scenario("list_offsets")
def max_timestamp_below_v7(k):
    """MAX_TIMESTAMP at v6, which does not know it."""
    t = three_batches(k)
    return list_offsets_v(k, t, MAX_TIMESTAMP, version=6)


@scenario("list_offsets")
def earliest_local(k):
    """EARLIEST_LOCAL (-4, v8) after DeleteRecords: the local log start."""
    t = three_batches(k)
    delete_records(k, t, 3)
    return list_offsets_v(k, t, EARLIEST_LOCAL, version=8)


@scenario("list_offsets")
def latest_tiered(k):
    """LATEST_TIERED (-5, v9) without tiered storage."""
    t = three_batches(k)
    return list_offsets_v(k, t, LATEST_TIERED, version=9)


@scenario("list_offsets")
def unknown_negative_timestamp(k):
    """A negative timestamp that names nothing (-9)."""
    t = three_batches(k)
    return list_offsets_v(k, t, -9, version=9)


def _by_time(k):
    t = k.create_topic("t")
    now = int(time.time() * 1000) - 60_000
    for i, v in enumerate((b"a", b"b", b"c")):
        k.produce(t, batch([v], timestamp_ms=now + 10_000 * i))
    return t, now


@scenario("list_offsets")
def timestamp_before_all(k):
    """A timestamp before every record: offset 0."""
    t, now = _by_time(k)
    return k.list_offsets(t, now - 5_000)


@scenario("list_offsets")
def timestamp_between(k):
    """A timestamp between the second and third records: offset 2."""
    t, now = _by_time(k)
    return [k.list_offsets(t, now + 15_000), k.list_offsets(t, now + 10_000)]


@scenario("list_offsets")
def timestamp_after_all(k):
    """A timestamp after every record: offset -1."""
    t, now = _by_time(k)
    return k.list_offsets(t, now + 50_000)


@scenario("list_offsets")
def latest_read_committed_open_txn(k):
    """LATEST with read_committed during an open transaction: the LSO; read_uncommitted: the HWM."""
    t = k.create_topic("t")
    open_txn(k, t, (b"x", b"y"))
    return [k.list_offsets(t, LATEST, isolation_level=READ_COMMITTED),
            k.list_offsets(t, LATEST, isolation_level=READ_UNCOMMITTED)]


@scenario("list_offsets")
def latest_read_committed_after_commit(k):
    """LATEST read_committed after the commit: the marker's offset + 1."""
    t = k.create_topic("t")
    tid, pid, epoch = open_txn(k, t, (b"x",))
    end(k, tid, pid, epoch, True)
    return k.list_offsets(t, LATEST, isolation_level=READ_COMMITTED)


@scenario("list_offsets")
def timestamp_read_committed_open_txn(k):
    """A timestamp lookup with read_committed that lands inside an open transaction."""
    t = k.create_topic("t")
    k.produce(t, batch([b"p0"], timestamp_ms=int(time.time() * 1000) - 10_000))
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    k.produce(t, txn_batch([b"x"], pid, epoch, 0), transactional_id=tid)
    return k.list_offsets(t, int(time.time() * 1000) - 5_000, isolation_level=READ_COMMITTED)


@scenario("list_offsets")
def missing_topic(k):
    """ListOffsets of a topic that does not exist."""
    return k.list_offsets(k.name("missing"), LATEST)


@scenario("list_offsets")
def missing_partition(k):
    """ListOffsets of partition 4 of a one-partition topic."""
    return k.list_offsets(k.create_topic("t"), LATEST, partition=4)


def _list_offsets_version(v: int):
    def fn(k):
        t = three_batches(k)
        return [list_offsets_v(k, t, EARLIEST, version=v), list_offsets_v(k, t, LATEST, version=v),
                list_offsets_v(k, k.name("missing"), LATEST, version=v)]

    fn.__name__ = f"version_v{v}"
    fn.__doc__ = f"ListOffsets v{v}: EARLIEST, LATEST and an unknown topic (the fields v{v} has)."
    scenario("list_offsets")(fn)


for _v in range(1, 12):
    _list_offsets_version(_v)


# ---------------------------------------------------------------------- leader epochs, timestamps inside a batch


def batch_with_times(times_values, **ids):
    """One uncompressed batch whose records carry their own timestamps [(ts, value), ...]."""
    base = times_values[0][0]
    body = b"".join(rb.encode_record(i, ts - base, b"k", v) for i, (ts, v) in enumerate(times_values))
    count = len(times_values)
    tail = struct.pack(">hiqqqhii", 0, count - 1, base, max(ts for ts, _ in times_values),
                       ids.get("pid", -1), ids.get("epoch", -1), ids.get("seq", -1), count) + body
    return struct.pack(">qiibI", 0, len(tail) + 9, 0, rb.MAGIC_V2, crc32c.crc32c(tail)) + tail


def list_offsets_epoch(k, topic, timestamp, leader_epoch, version=7):
    m = mod(LIST_OFFSETS, version)
    return k.send(m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(m.ListOffsetsTopic(
        name=topic, partitions=(m.ListOffsetsPartition(partition_index=0, current_leader_epoch=leader_epoch,
                                                       timestamp=timestamp),)),)))


def fetch_epoch(k, topic, offset, *, current_leader_epoch=-1, last_fetched_epoch=-1, version=12):
    m = mod(FETCH, version)
    return k.send(m.FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, topics=(m.FetchTopic(topic=topic, partitions=(m.FetchPartition(
            partition=0, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
            last_fetched_epoch=last_fetched_epoch, log_start_offset=-1, partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=(), rack_id=""))


@scenario("list_offsets")
def timestamp_inside_a_batch(k):
    """Records of one batch with their own timestamps: a lookup between two of them gives the later record."""
    t = k.create_topic("t")
    now = int(time.time() * 1000) - 60_000
    k.produce(t, batch_with_times([(now, b"a"), (now + 10_000, b"b"), (now + 20_000, b"c")]))
    return [k.list_offsets(t, now + 5_000), k.list_offsets(t, now + 20_000), k.list_offsets(t, MAX_TIMESTAMP)]


@scenario("list_offsets")
def max_timestamp_not_last_in_batch(k):
    """MAX_TIMESTAMP when the largest timestamp is the first record of a batch."""
    t = k.create_topic("t")
    now = int(time.time() * 1000) - 60_000
    k.produce(t, batch([b"x"], timestamp_ms=now))
    k.produce(t, batch_with_times([(now + 30_000, b"a"), (now + 5_000, b"b")]))
    return k.list_offsets(t, MAX_TIMESTAMP)


@scenario("list_offsets")
def timestamp_log_append_time(k):
    """message.timestamp.type=LogAppendTime: a lookup by an old producer time finds the first record."""
    t = k.create_topic("t", configs={"message.timestamp.type": "LogAppendTime"})
    k.produce(t, batch([b"a"], timestamp_ms=1_000_000))
    return [k.list_offsets(t, 2_000_000), k.list_offsets(t, int(time.time() * 1000) + 3_600_000)]


@scenario("list_offsets")
def earliest_after_delete_inside_batch(k):
    """DeleteRecords to offset 1, inside the first batch: EARLIEST is 1."""
    t = three_batches(k)
    return [delete_records(k, t, 1), k.list_offsets(t, EARLIEST), k.fetch(t, 1)]


@scenario("list_offsets")
def current_leader_epoch(k):
    """ListOffsets naming the current leader epoch (0), an older one (-1 means none) and a future one (7)."""
    t = three_batches(k)
    return [list_offsets_epoch(k, t, LATEST, 0), list_offsets_epoch(k, t, LATEST, 7)]


@scenario("fetch")
def current_leader_epoch_future(k):
    """Fetch with current_leader_epoch 0 (the leader's) and 7 (ahead of the leader)."""
    t = three_batches(k)
    return [fetch_epoch(k, t, 0, current_leader_epoch=0), fetch_epoch(k, t, 0, current_leader_epoch=7)]


@scenario("fetch")
def last_fetched_epoch_diverging(k):
    """Fetch at offset 3 saying the last fetched epoch was 5 (the log has only epoch 0)."""
    t = three_batches(k)
    return fetch_epoch(k, t, 3, last_fetched_epoch=5)


@scenario("fetch")
def read_committed_between_lso_and_hwm(k):
    """read_committed Fetch at an offset past the LSO but below the high watermark (inside an open transaction)."""
    t = k.create_topic("t")
    open_txn(k, t, (b"x", b"y"))
    k.produce(t, batch([b"after"]))
    return [k.fetch(t, 2, isolation_level=READ_COMMITTED), k.fetch(t, 3, isolation_level=READ_COMMITTED)]


@scenario("fetch")
def aborted_txn_small_max_bytes(k):
    """read_committed with a limit of one batch over an aborted transaction: its aborted entry comes with its first batch."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    k.produce(t, txn_batch([b"x" * 50], pid, epoch, 0), transactional_id=tid)
    k.produce(t, txn_batch([b"y" * 50], pid, epoch, 1), transactional_id=tid)
    end(k, tid, pid, epoch, False)
    return [k.fetch(t, isolation_level=READ_COMMITTED, max_bytes=10),
            k.fetch(t, 1, isolation_level=READ_COMMITTED, max_bytes=10),
            k.fetch(t, 2, isolation_level=READ_COMMITTED, max_bytes=10)]


@scenario("fetch")
def last_fetched_epoch_current(k):
    """Fetch with last fetched epoch 0 (the leader's): at offset 3 records as usual; past the log end the
    diverging epoch (0, log end) and no records."""
    t = three_batches(k)
    return [fetch_epoch(k, t, 3, last_fetched_epoch=0), fetch_epoch(k, t, 9, last_fetched_epoch=0)]


@scenario("fetch")
def current_leader_epoch_older(k):
    """Fetch and ListOffsets with current_leader_epoch -2 (older than any leader's)."""
    t = three_batches(k)
    return [fetch_epoch(k, t, 0, current_leader_epoch=-2), list_offsets_epoch(k, t, LATEST, -2)]


@scenario("list_offsets")
def duplicate_partition(k):
    """ListOffsets naming partition 0 twice."""
    t = three_batches(k)
    m = mod(LIST_OFFSETS, 7)
    part = m.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=LATEST)
    return k.send(m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
        m.ListOffsetsTopic(name=t, partitions=(part, part)),)))


@scenario("fetch")
def duplicate_partition(k):
    """Fetch naming partition 0 twice, at offsets 0 and 3."""
    t = three_batches(k)
    return fetch_many(k, [(t, 0, 0), (t, 0, 3)])


@scenario("fetch")
def zstd_records_below_v10(k):
    """zstd-compressed records fetched with Fetch v9 (KIP-110: v10+ only) and v10."""
    from oncelog.client import recordcodec as rc

    from .scenarios_produce import compressed

    t = k.create_topic("t")
    k.produce(t, compressed(rc.COMPRESSION_ZSTD))
    return [fetch_v(k, t, version=9), fetch_v(k, t, version=10)]


@scenario("fetch")
def topic_compression_zstd_below_v10(k):
    """compression.type=zstd on the topic, a plain batch produced, then fetched with v9."""
    t = k.create_topic("t", configs={"compression.type": "zstd"})
    k.produce(t, batch([b"a", b"b"]))
    return fetch_v(k, t, version=9)
