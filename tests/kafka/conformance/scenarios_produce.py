"""Produce edge cases: acks, sequences, epochs, fencing, record errors, compression, versions.

Every batch is built here as a client builds it (:func:`framework.batch`, or
:mod:`oncelog.client.recordcodec` for compressed ones), so both brokers receive the same bytes;
each scenario returns the Produce answers and, where what was stored matters, a Fetch of it.
Idempotent producer ids come from InitProducerId, so they are real on both brokers.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import time

import pyarrow as pa

from oncelog.client import recordcodec as rc
from oncelog.protocol import records as rb

from .framework import PRODUCE, batch, mod, scenario

HOUR_MS = 3600 * 1000
DAY_MS = 24 * HOUR_MS


def part(resp, topic: int = 0, partition: int = 0):
    """One partition's answer of a Produce response."""
    return resp.responses[topic].partition_responses[partition]


def by_partition(resp):
    """A Produce response with each topic's partitions in index order (Kafka's order follows a
    hash map's, which is no part of the answer)."""
    return dataclasses.replace(resp, responses=tuple(
        dataclasses.replace(t, partition_responses=tuple(sorted(t.partition_responses, key=lambda p: p.index)))
        for t in resp.responses))


def times_masked(resp):
    """A Produce response with the clock readings in record errors' messages replaced by ``<ms>``
    (the bounds are the broker's now +- the topic's limits)."""
    mask = lambda text: re.sub(r"-?\d{10,}", "<ms>", text) if text else text  # noqa: E731
    return dataclasses.replace(resp, responses=tuple(dataclasses.replace(t, partition_responses=tuple(
        dataclasses.replace(p, record_errors=tuple(dataclasses.replace(
            e, batch_index_error_message=mask(e.batch_index_error_message)) for e in p.record_errors))
        for p in t.partition_responses)) for t in resp.responses))


def idempotent(k):
    """A fresh idempotent producer: (producer id, epoch)."""
    init = k.init_producer_id()
    return init.producer_id, init.producer_epoch


def compressed(codec: int, values=(b"a", b"b", b"c"), **ids) -> bytes:
    """One batch of ``values`` (key ``k``) compressed with ``codec`` as a client would send it."""
    n = len(values)
    section = rc.encode_records(pa.array([b"k"] * n, pa.binary()), pa.array(list(values), pa.binary()), None)
    return rc.encode_batch(rb.compress_records(codec, section), n, timestamp_ms=int(time.time() * 1000),
                           compression=codec, **ids)


def produce_raw(k, topic: str, parts, *, acks: int = -1, version: int = 9, transactional_id=None):
    """A Produce of [(partition, records or None), ...] (records None is sent as null)."""
    m = mod(PRODUCE, version)
    return k.send(m.ProduceRequest(
        transactional_id=transactional_id, acks=acks, timeout=datetime.timedelta(seconds=30),
        topic_data=(m.TopicProduceData(name=topic, partition_data=tuple(
            m.PartitionProduceData(index=p, records=None if b is None else bytes(b)) for p, b in parts)),)))


# ---------------------------------------------------------------------- acks


@scenario("produce")
def plain_acks_all(k):
    """Two plain batches with acks=all: base offsets 0 and 2, log start 0."""
    t = k.create_topic("t")
    first = k.produce(t, batch([b"a", b"b"]))
    second = k.produce(t, batch([b"c"]))
    return [first, second, k.fetch(t)]


@scenario("produce")
def acks_one(k):
    """acks=1: answered with the base offset, the record readable."""
    t = k.create_topic("t")
    return [k.produce(t, batch([b"a"]), acks=1), k.produce(t, batch([b"b"]), acks=1), k.fetch(t)]


@scenario("produce")
def acks_zero(k):
    """acks=0: no answer; the record is stored all the same (then an acks=1 batch lands after it)."""
    t = k.create_topic("t")
    k.produce(t, batch([b"fire-and-forget"]), acks=0)
    after = k.produce(t, batch([b"acked"]), acks=1)
    return [after, k.fetch(t)]


@scenario("produce")
def acks_invalid_two(k):
    """acks=2 is INVALID_REQUIRED_ACKS for every partition; nothing stored."""
    t = k.create_topic("t")
    return [k.produce(t, batch(), acks=2), k.fetch(t)]


@scenario("produce")
def acks_invalid_minus_two(k):
    """acks=-2 is INVALID_REQUIRED_ACKS too."""
    t = k.create_topic("t")
    return [k.produce(t, batch(), acks=-2), k.fetch(t)]


@scenario("produce")
def unknown_topic(k):
    """Produce to a topic that does not exist (no auto-creation on Produce)."""
    return k.produce(k.name("missing"), batch())


@scenario("produce")
def unknown_partition_index(k):
    """Partition 5 of a one-partition topic: UNKNOWN_TOPIC_OR_PARTITION."""
    t = k.create_topic("t")
    return k.produce(t, [(5, batch())])


@scenario("produce")
def negative_partition_index(k):
    """Partition -1: UNKNOWN_TOPIC_OR_PARTITION."""
    t = k.create_topic("t")
    return k.produce(t, [(-1, batch())])


@scenario("produce")
def multi_partition_one_bad(k):
    """Three partitions, the middle one with a bad CRC: only it fails, the others are stored."""
    t = k.create_topic("t", partitions=3)
    bad = bytearray(batch([b"x"]))
    bad[-1] ^= 0xFF
    resp = by_partition(k.produce(t, [(0, batch([b"p0"])), (1, bytes(bad)), (2, batch([b"p2"]))]))
    return [resp, k.fetch(t, partition=0), k.fetch(t, partition=1), k.fetch(t, partition=2)]


@scenario("produce")
def multi_partition_one_unknown(k):
    """Partitions 0 and 7 of a one-partition topic: 0 stored, 7 UNKNOWN_TOPIC_OR_PARTITION."""
    t = k.create_topic("t")
    return [by_partition(k.produce(t, [(0, batch([b"a"])), (7, batch([b"b"]))])), k.fetch(t)]


@scenario("produce")
def internal_topic(k):
    """A client's Produce to __consumer_offsets is refused (internal topic)."""
    return k.produce("__consumer_offsets", batch())


@scenario("produce")
def two_batches_one_request(k):
    """Two plain batches in one partition's records: one answer, base offset of the first."""
    t = k.create_topic("t")
    return [k.produce(t, batch([b"a", b"b"]) + batch([b"c"])), k.fetch(t)]


@scenario("produce")
def empty_records(k):
    """A partition with zero-length records."""
    t = k.create_topic("t")
    return [produce_raw(k, t, [(0, b"")]), k.fetch(t)]


@scenario("produce")
def truncated_batch(k):
    """A batch cut short (its length overruns the bytes sent): CORRUPT_MESSAGE."""
    t = k.create_topic("t")
    return [produce_raw(k, t, [(0, batch([b"abcdef"])[:-3])]), k.fetch(t)]


# ---------------------------------------------------------------------- sequences


@scenario("produce")
def idempotent_duplicate(k):
    """An idempotent producer's batch sent twice: the second answer is the first's offset, stored once."""
    t = k.create_topic("t")
    init = k.init_producer_id()
    pid, epoch = init.producer_id, init.producer_epoch
    b = batch([b"a", b"b"], pid=pid, epoch=epoch, seq=0)
    return [init, k.produce(t, b), k.produce(t, b), k.fetch(t)]


@scenario("produce")
def sequence_gap(k):
    """Sequence 0 then 2 (1 missing): OUT_OF_ORDER_SEQUENCE_NUMBER, nothing of it stored."""
    t = k.create_topic("t")
    pid, epoch = idempotent(k)
    return [k.produce(t, batch([b"a"], pid=pid, epoch=epoch, seq=0)),
            k.produce(t, batch([b"c"], pid=pid, epoch=epoch, seq=2)), k.fetch(t)]


@scenario("produce")
def sequence_gap_then_next(k):
    """After an out-of-order batch is refused, the expected sequence is still accepted."""
    t = k.create_topic("t")
    pid, epoch = idempotent(k)
    return [k.produce(t, batch([b"a"], pid=pid, epoch=epoch, seq=0)),
            k.produce(t, batch([b"c"], pid=pid, epoch=epoch, seq=5)),
            k.produce(t, batch([b"b"], pid=pid, epoch=epoch, seq=1)), k.fetch(t)]


@scenario("produce")
def sequence_overlap(k):
    """A batch overlapping the last one (seq 1..2 after 0..1) is OUT_OF_ORDER_SEQUENCE_NUMBER."""
    t = k.create_topic("t")
    pid, epoch = idempotent(k)
    return [k.produce(t, batch([b"a", b"b"], pid=pid, epoch=epoch, seq=0)),
            k.produce(t, batch([b"b", b"c"], pid=pid, epoch=epoch, seq=1)), k.fetch(t)]


def _six_batches(k):
    t = k.create_topic("t")
    pid, epoch = idempotent(k)
    batches = [batch([b"v%d" % i], pid=pid, epoch=epoch, seq=i) for i in range(6)]
    answers = [k.produce(t, b) for b in batches]
    return t, batches, answers


@scenario("produce")
def duplicate_within_last_five(k):
    """Six batches, then the second (seq 1, among the last five) again: its original offset."""
    t, batches, answers = _six_batches(k)
    return [answers, k.produce(t, batches[1]), k.produce(t, batches[5]), k.fetch(t)]


@scenario("produce")
def duplicate_outside_last_five(k):
    """Six batches, then the first (seq 0, no longer among the last five) again: refused."""
    t, batches, answers = _six_batches(k)
    return [answers[-1], k.produce(t, batches[0]), k.fetch(t)]


@scenario("produce")
def duplicate_in_multi_batch_request(k):
    """A request of a duplicate batch followed by the next one."""
    t = k.create_topic("t")
    pid, epoch = idempotent(k)
    b0 = batch([b"a"], pid=pid, epoch=epoch, seq=0)
    b1 = batch([b"b"], pid=pid, epoch=epoch, seq=1)
    return [k.produce(t, b0), k.produce(t, b0 + b1), k.fetch(t)]


@scenario("produce")
def idempotent_two_batches_one_request(k):
    """Two consecutive idempotent batches (seq 0, 1) in one request are both stored."""
    t = k.create_topic("t")
    pid, epoch = idempotent(k)
    return [k.produce(t, batch([b"a"], pid=pid, epoch=epoch, seq=0) + batch([b"b", b"c"], pid=pid, epoch=epoch, seq=1)),
            k.produce(t, batch([b"d"], pid=pid, epoch=epoch, seq=3)), k.fetch(t)]


@scenario("produce")
def first_sequence_not_zero(k):
    """A new producer's first batch with sequence 7 (no state on the partition yet)."""
    t = k.create_topic("t")
    pid, epoch = idempotent(k)
    return [k.produce(t, batch([b"a"], pid=pid, epoch=epoch, seq=7)),
            k.produce(t, batch([b"b"], pid=pid, epoch=epoch, seq=8)), k.fetch(t)]


@scenario("produce")
def unknown_producer_id(k):
    """A producer id no InitProducerId gave out, sequence 0 then 1."""
    t = k.create_topic("t")
    pid = 987_654_321
    return [k.produce(t, batch([b"a"], pid=pid, epoch=0, seq=0)),
            k.produce(t, batch([b"b"], pid=pid, epoch=0, seq=1)), k.fetch(t)]


@scenario("produce")
def sequence_wraps_from_max(k):
    """A batch at sequence 2147483647 then one at 0: the sequence wraps."""
    t = k.create_topic("t")
    pid, epoch = idempotent(k)
    return [k.produce(t, batch([b"a"], pid=pid, epoch=epoch, seq=2147483647)),
            k.produce(t, batch([b"b"], pid=pid, epoch=epoch, seq=0)), k.fetch(t)]


# ---------------------------------------------------------------------- epochs


@scenario("produce")
def stale_epoch(k):
    """Epoch 1 written, then a batch of epoch 0: INVALID_PRODUCER_EPOCH."""
    t = k.create_topic("t")
    pid, _ = idempotent(k)
    return [k.produce(t, batch([b"a"], pid=pid, epoch=1, seq=0)),
            k.produce(t, batch([b"b"], pid=pid, epoch=0, seq=1)), k.fetch(t)]


@scenario("produce")
def epoch_bump_resets_sequence(k):
    """Epoch 0 seq 0..1, then epoch 1 starting again at seq 0: accepted."""
    t = k.create_topic("t")
    pid, _ = idempotent(k)
    return [k.produce(t, batch([b"a", b"b"], pid=pid, epoch=0, seq=0)),
            k.produce(t, batch([b"c"], pid=pid, epoch=1, seq=0)),
            k.produce(t, batch([b"d"], pid=pid, epoch=1, seq=1)), k.fetch(t)]


@scenario("produce")
def epoch_bump_nonzero_sequence(k):
    """A new epoch whose first batch is sequence 2: OUT_OF_ORDER_SEQUENCE_NUMBER."""
    t = k.create_topic("t")
    pid, _ = idempotent(k)
    return [k.produce(t, batch([b"a", b"b"], pid=pid, epoch=0, seq=0)),
            k.produce(t, batch([b"c"], pid=pid, epoch=1, seq=2)), k.fetch(t)]


@scenario("produce")
def old_epoch_duplicate(k):
    """After an epoch bump, a retry of the old epoch's batch is INVALID_PRODUCER_EPOCH, not a duplicate."""
    t = k.create_topic("t")
    pid, _ = idempotent(k)
    old = batch([b"a"], pid=pid, epoch=0, seq=0)
    return [k.produce(t, old), k.produce(t, batch([b"b"], pid=pid, epoch=1, seq=0)), k.produce(t, old), k.fetch(t)]


# ---------------------------------------------------------------------- transactional batches


def _txn_producer(k, t):
    tid = k.name("tx")
    init = k.init_producer_id(tid)
    return tid, init.producer_id, init.producer_epoch


@scenario("produce")
def txn_batch_without_add_partitions(k):
    """A transactional batch (Produce v9) to a partition not added to the transaction: refused."""
    t = k.create_topic("t")
    tid, pid, epoch = _txn_producer(k, t)
    return [k.produce(t, batch([b"a"], pid=pid, epoch=epoch, seq=0, transactional=True), transactional_id=tid),
            k.fetch(t)]


@scenario("produce")
def txn_batch_without_add_partitions_v11(k):
    """The same at Produce v11 (the last version before implicit adds)."""
    t = k.create_topic("t")
    tid, pid, epoch = _txn_producer(k, t)
    return [k.produce(t, batch([b"a"], pid=pid, epoch=epoch, seq=0, transactional=True), transactional_id=tid,
                      version=11), k.fetch(t)]


@scenario("produce")
def txn_batch_after_add_partitions(k):
    """A transactional batch after AddPartitionsToTxn: stored, LSO held at its offset."""
    t = k.create_topic("t")
    tid, pid, epoch = _txn_producer(k, t)
    add = k.add_partitions_to_txn(tid, pid, epoch, {t: [0]})
    return [add, k.produce(t, batch([b"a"], pid=pid, epoch=epoch, seq=0, transactional=True), transactional_id=tid),
            k.fetch(t)]


@scenario("produce")
def txn_batch_without_transactional_id(k):
    """A transactional batch from an idempotent producer, no transactional id in the request."""
    t = k.create_topic("t")
    pid, epoch = idempotent(k)
    return [k.produce(t, batch([b"a"], pid=pid, epoch=epoch, seq=0, transactional=True)), k.fetch(t)]


@scenario("produce")
def txn_id_with_plain_batch(k):
    """A Produce naming a transactional id whose batch is not transactional."""
    t = k.create_topic("t")
    tid, pid, epoch = _txn_producer(k, t)
    return [k.produce(t, batch([b"a"], pid=pid, epoch=epoch, seq=0), transactional_id=tid), k.fetch(t)]


@scenario("produce")
def txn_stale_epoch_after_reinit(k):
    """After a second InitProducerId (epoch bumped), a batch of the old epoch is refused."""
    t = k.create_topic("t")
    tid, pid, epoch = _txn_producer(k, t)
    again = k.init_producer_id(tid)
    add = k.add_partitions_to_txn(tid, again.producer_id, again.producer_epoch, {t: [0]})
    return [again, add, k.produce(t, batch([b"a"], pid=pid, epoch=epoch, seq=0, transactional=True),
                                  transactional_id=tid), k.fetch(t)]


# ---------------------------------------------------------------------- record errors


@scenario("produce")
def corrupt_crc(k):
    """A batch whose CRC does not match its bytes: CORRUPT_MESSAGE, nothing stored."""
    t = k.create_topic("t")
    bad = bytearray(batch([b"hello"]))
    bad[-2] ^= 0x55
    return [k.produce(t, bytes(bad)), k.fetch(t)]


@scenario("produce")
def bad_magic(k):
    """A batch with magic 1 in a Produce v9."""
    t = k.create_topic("t")
    bad = bytearray(batch([b"hello"]))
    bad[16] = 1
    return [k.produce(t, bytes(bad)), k.fetch(t)]


@scenario("produce")
def compacted_topic_null_key(k):
    """cleanup.policy=compact and a record without a key: INVALID_RECORD with record_errors."""
    t = k.create_topic("t", configs={"cleanup.policy": "compact"})
    return [k.produce(t, batch([b"a", b"b"], keys=[b"k", None])), k.fetch(t)]


@scenario("produce")
def message_too_large(k):
    """A batch over the topic's max.message.bytes=200: MESSAGE_TOO_LARGE."""
    t = k.create_topic("t", configs={"max.message.bytes": "200"})
    return [k.produce(t, batch([b"x" * 300])), k.produce(t, batch([b"small"])), k.fetch(t)]


@scenario("produce")
def timestamp_too_old(k):
    """A record two days old with message.timestamp.before.max.ms=1h: INVALID_TIMESTAMP, record_errors."""
    t = k.create_topic("t", configs={"message.timestamp.before.max.ms": str(HOUR_MS)})
    old = int(time.time() * 1000) - 2 * DAY_MS
    return [times_masked(k.produce(t, batch([b"a"], timestamp_ms=old))), k.fetch(t)]


@scenario("produce")
def timestamp_too_new(k):
    """A record two days ahead with message.timestamp.after.max.ms=1h: INVALID_TIMESTAMP."""
    t = k.create_topic("t", configs={"message.timestamp.after.max.ms": str(HOUR_MS)})
    ahead = int(time.time() * 1000) + 2 * DAY_MS
    return [times_masked(k.produce(t, batch([b"a", b"b"], timestamp_ms=ahead))), k.fetch(t)]


@scenario("produce")
def timestamp_log_append_time(k):
    """message.timestamp.type=LogAppendTime: an old record is accepted and log_append_time is set."""
    t = k.create_topic("t", configs={"message.timestamp.type": "LogAppendTime",
                                     "message.timestamp.before.max.ms": str(HOUR_MS)})
    old = int(time.time() * 1000) - 2 * DAY_MS
    return [k.produce(t, batch([b"a"], timestamp_ms=old)), k.fetch(t)]


# ---------------------------------------------------------------------- compression


def _codec_scenario(codec: int, name: str):
    def fn(k):
        t = k.create_topic("t")
        return [k.produce(t, compressed(codec)), k.produce(t, compressed(codec, (b"d",))), k.fetch(t)]

    fn.__name__ = f"compressed_{name}"
    fn.__doc__ = f"Two {name}-compressed batches: stored and fetched back as written."
    scenario("produce")(fn)


for _codec, _name in ((rc.COMPRESSION_GZIP, "gzip"), (rc.COMPRESSION_SNAPPY, "snappy"), (rc.COMPRESSION_LZ4, "lz4"),
                      (rc.COMPRESSION_ZSTD, "zstd")):
    _codec_scenario(_codec, _name)


@scenario("produce")
def zstd_below_v7(k):
    """A zstd batch in Produce v6: UNSUPPORTED_COMPRESSION_TYPE (KIP-110)."""
    t = k.create_topic("t")
    return [k.produce(t, compressed(rc.COMPRESSION_ZSTD), version=6), k.fetch(t)]


@scenario("produce")
def compressed_idempotent_duplicate(k):
    """A gzip idempotent batch sent twice: one copy stored."""
    t = k.create_topic("t")
    pid, epoch = idempotent(k)
    b = compressed(rc.COMPRESSION_GZIP, producer_id=pid, producer_epoch=epoch, base_sequence=0)
    return [k.produce(t, b), k.produce(t, b), k.fetch(t)]


@scenario("produce")
def topic_compression_type(k):
    """compression.type=gzip on the topic: an uncompressed batch is stored and read back the same."""
    t = k.create_topic("t", configs={"compression.type": "gzip"})
    return [k.produce(t, batch([b"a", b"b"])), k.fetch(t)]


# ---------------------------------------------------------------------- versions


def _version_scenario(v: int):
    def fn(k):
        t = k.create_topic("t")
        bad = bytearray(batch([b"x"]))
        bad[-1] ^= 1
        return [k.produce(t, batch([b"a"]), version=v), k.produce(t, bytes(bad), version=v),
                k.produce(k.name("missing"), batch(), version=v)]

    fn.__name__ = f"version_v{v}"
    fn.__doc__ = f"Produce v{v}: a good batch, a corrupt one, an unknown topic (the fields v{v} has)."
    scenario("produce")(fn)


for _v in range(3, 13):
    _version_scenario(_v)


@scenario("produce")
def min_insync_above_replication(k):
    """min.insync.replicas=2 on a one-replica topic: acks=all and acks=1 answers."""
    t = k.create_topic("t", configs={"min.insync.replicas": "2"})
    return [k.produce(t, batch([b"all"]), acks=-1), k.produce(t, batch([b"one"]), acks=1), k.fetch(t)]


@scenario("produce")
def acks_zero_error_closes_connection(k):
    """acks=0 to a missing topic: no answer, and the broker closes the connection (the client learns
    of the error by reconnecting)."""
    k.produce(k.name("missing"), batch(), acks=0)
    return {"closed": k.client.is_closed(timeout=5)}


@scenario("produce")
def acks_zero_success_keeps_connection(k):
    """acks=0 that succeeds: the connection stays open and serves the next request."""
    t = k.create_topic("t")
    k.produce(t, batch([b"a"]), acks=0)
    return [k.produce(t, batch([b"b"]), acks=1), k.fetch(t)]


@scenario("produce")
def txn_batch_unknown_transactional_id(k):
    """A transactional batch naming a transactional id never initialised."""
    t = k.create_topic("t")
    pid, epoch = idempotent(k)
    return [k.produce(t, batch([b"a"], pid=pid, epoch=epoch, seq=0, transactional=True),
                      transactional_id=k.name("never")), k.fetch(t)]


@scenario("produce")
def txn_batch_after_abort_not_readded(k):
    """TV1: after the abort completes, a batch of the same epoch without AddPartitionsToTxn, at v9 and v11."""
    t = k.create_topic("t")
    tid, pid, epoch = _txn_producer(k, t)
    k.add_partitions_to_txn(tid, pid, epoch, {t: [0]})
    k.produce(t, batch([b"a"], pid=pid, epoch=epoch, seq=0, transactional=True), transactional_id=tid)
    k.end_txn(tid, pid, epoch, False)
    k.wait_txn_complete(tid)
    return [k.produce(t, batch([b"b"], pid=pid, epoch=epoch, seq=1, transactional=True), transactional_id=tid),
            k.produce(t, batch([b"b"], pid=pid, epoch=epoch, seq=1, transactional=True), transactional_id=tid,
                      version=11)]


@scenario("produce")
def sequence_after_delete_records(k):
    """An idempotent producer whose batches were all deleted (DeleteRecords to the end) goes on at sequence 5."""
    from .scenarios_fetch import delete_records

    t = k.create_topic("t")
    pid, epoch = idempotent(k)
    k.produce(t, batch([b"a", b"b"], pid=pid, epoch=epoch, seq=0))
    return [delete_records(k, t, -1), k.produce(t, batch([b"c"], pid=pid, epoch=epoch, seq=5)),
            k.produce(t, batch([b"d"], pid=pid, epoch=epoch, seq=0)), k.fetch(t, 2)]


@scenario("produce")
def duplicate_partition_in_request(k):
    """One Produce naming partition 0 twice."""
    t = k.create_topic("t")
    return [by_partition(k.produce(t, [(0, batch([b"a"])), (0, batch([b"b"]))])), k.fetch(t)]


# ---------------------------------------------------------------------- malformed records inside a valid batch


UNKNOWN_SERVER_ERROR = ("by design: an unknown codec or an undecompressable payload is INVALID_RECORD (docs/limits.md, "
                        "Record batches); Kafka 4.4 lets the codec's exception escape as UNKNOWN_SERVER_ERROR")
OFFSET_DELTAS = ("by design: offset deltas must be 0..n-1, the bad record named in record_errors (docs/limits.md, Record "
                 "batches); Kafka 4.4 stores such an uncompressed batch (its readers then skip or stall)")
DECLARED = {"codec 5": UNKNOWN_SERVER_ERROR, "codec 6": UNKNOWN_SERVER_ERROR, "codec 7": UNKNOWN_SERVER_ERROR,
            "gzip random payload": UNKNOWN_SERVER_ERROR, "gzip offset deltas 0 -1 -1000": UNKNOWN_SERVER_ERROR,
            "offset deltas 0 -1 -1000": OFFSET_DELTAS, "offset deltas 0 2 1": OFFSET_DELTAS,
            "random records": OFFSET_DELTAS + " (random bytes fail that check first; Kafka fails parsing them "
                                              "with no record_errors)"}


def _bad_batch_scenario(name: str, build):
    def fn(k):
        t = k.create_topic("t")
        return [k.produce(t, build()), k.fetch(t)]

    fn.__name__ = "malformed_" + "".join(c if c.isalnum() else "_" for c in name.lower()).strip("_")
    fn.__doc__ = f"A CRC-valid batch whose records are malformed ({name}): refused, nothing stored."
    scenario("produce", differs=DECLARED.get(name))(fn)


def _register_bad_batches():
    from tests import bad_batches as bb

    cases = {name: build for name, (build, _) in bb.REPRODUCERS.items()}
    cases.update({"short record length": bb.short_length, "trailing bytes": bb.trailing_bytes,
                  "negative header count": bb.negative_header_count, "null header key": bb.null_header_key,
                  "varint too long": bb.varint_too_long,
                  "gzip offset deltas 0 -1 -1000": lambda: bb.gzip_of(
                      b"".join(bb.record(d, b"value-%d" % i) for i, d in enumerate((0, -1, -1000))), 3),
                  "offset deltas 0 2 1": lambda: bb.offset_deltas((0, 2, 1))})
    for name, build in cases.items():
        _bad_batch_scenario(name, build)


_register_bad_batches()


@scenario("produce")
def base_offset_not_zero(k):
    """A client batch whose base offset is 5 instead of 0."""
    t = k.create_topic("t")
    b = bytearray(batch([b"a", b"b"]))
    b[0:8] = (5).to_bytes(8, "big")
    return [k.produce(t, bytes(b)), k.fetch(t)]


@scenario("produce")
def topic_compression_zstd_produce_v6(k):
    """compression.type=zstd on the topic and an uncompressed batch in Produce v6."""
    t = k.create_topic("t", configs={"compression.type": "zstd"})
    return [k.produce(t, batch([b"a"]), version=6), k.fetch(t)]
