"""The sink in one SparkSession (the session fixture): columns and options as Spark's Kafka sink,
exactly-once streaming writes, the foreachBatch path (txnAppId/txnVersion), and the commit
protocol's fencing rules driven directly against a real broker."""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest
from kio.schema.errors import ErrorCode

from oncelog.client.kafka import KafkaClient, KafkaProtocolError, TransactionalProducer
from oncelog.client.recordcodec import encode_batch, encode_records
from oncelog.spark.barrier import open_barrier
from oncelog.spark.batch_commit import PENDING, BatchLostError, CommitProtocol, Decision, StaleRunError, Txn

from ..helpers import consume_all, create_topic


def produce(bootstrap, topic, n, partitions=2):
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def stream_to(spark, bootstrap, src, ckpt, **sink_opts):
    df = (spark.readStream.format("oncelog").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", src).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 50).load())
    return df


def run_available_now(df, bootstrap, ckpt, **opts):
    w = df.writeStream.format("oncelog").option("kafka.bootstrap.servers", bootstrap).option("checkpointLocation", ckpt)
    for k, v in opts.items():
        w = w.option(k, v)
    q = w.trigger(availableNow=True).start()
    try:
        assert q.awaitTermination(120), "query did not finish"
        assert q.exception() is None, q.exception()
    finally:
        q.stop()
    return q


def test_exactly_once_stream_keys_headers_partition_and_topic_columns(spark, broker, tmp_path, uniq):
    src, out_a, out_b = f"src-{uniq}", f"a-{uniq}", f"b-{uniq}"
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, out_a, 3)
    create_topic(broker.bootstrap, out_b, 3)
    produce(broker.bootstrap, src, 300)
    df = stream_to(spark, broker.bootstrap, src, None).selectExpr(
        "key", "concat(cast(value as string), '!') as value",
        f"if(offset % 2 = 0, '{out_a}', '{out_b}') as topic",
        "if(offset % 3 = 0, 2, null) as partition",
        "array(named_struct('key', 'src', 'value', cast(cast(offset as string) as binary))) as headers")
    q = run_available_now(df, broker.bootstrap, str(tmp_path / "ck"))
    assert len(q.recentProgress) >= 6  # 300 rows at 50 per trigger
    got = {}
    for topic in (out_a, out_b):
        rows = consume_all(broker.bootstrap, topic, 3, expected=150, timeout=30, isolation="read_committed")
        for p, recs in rows.items():
            for _off, key, value, headers in recs:
                assert value.endswith(b"!")
                (hk, hv), = headers
                offset = int(hv)
                got[(key, value)] = (topic, p, offset)
                assert topic == (out_a if offset % 2 == 0 else out_b)
                if offset % 3 == 0:
                    assert p == 2
    assert len(got) == 300
    # Keyed rows without a partition land where Kafka's default partitioner puts them.
    from kafka.partitioner.default import murmur2

    for (key, _), (_topic, p, offset) in got.items():
        if offset % 3:
            assert p == (murmur2(key) & 0x7FFFFFFF) % 3


def test_bad_columns_and_options_fail_at_start_naming_them(spark, broker, tmp_path, uniq):
    src = f"src-{uniq}"
    create_topic(broker.bootstrap, src, 1)
    base = stream_to(spark, broker.bootstrap, src, None)
    cases = [
        (base.selectExpr("key"), {"topic": "x"}, "'value' not found"),
        (base.selectExpr("offset as value"), {"topic": "x"}, "value attribute type must be a string or binary"),
        (base.selectExpr("value"), {}, "topic option required"),
        (base.selectExpr("value", "1 as partition", "'t' as topic").selectExpr("value", "cast(partition as long) as partition", "topic"),
         {}, "partition attribute type must be an int"),
        (base.selectExpr("value"), {"topic": "x", "deliveryGuarantee": "twice"}, "deliveryGuarantee"),
        (base.selectExpr("value"), {"topic": "x", "atomicity": "row"}, "atomicity"),
        (base.selectExpr("value"), {"topic": "x", "atomicity": "partition", "deliveryGuarantee": "at-least-once"},
         "atomicity=partition is a mode of deliveryGuarantee=exactly-once"),
        (base.selectExpr("value"), {"topic": "x", "kafka.transactional.id": "t"}, "kafka.transactional.id"),
        (base.selectExpr("value"), {"topic": "x", "transaction.timeout.ms": "3600000"}, "transaction.max.timeout.ms"),
    ]
    for i, (df, opts, needle) in enumerate(cases):
        w = (df.writeStream.format("oncelog").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("checkpointLocation", str(tmp_path / f"ck{i}")))
        for k, v in opts.items():
            w = w.option(k, v)
        with pytest.raises(Exception) as err:
            q = w.trigger(availableNow=True).start()
            try:
                q.awaitTermination(60)
                if q.exception() is not None:
                    raise q.exception()
            finally:
                q.stop()
        assert needle in str(err.value), (needle, str(err.value)[:2000])


def test_foreach_batch_exactly_once_with_txn_app_id_and_version(spark, broker, tmp_path, uniq):
    """The Update-mode route: an aggregation written from foreachBatch through the batch writer
    with txnAppId/txnVersion; writing the same version again (a replay) adds nothing."""
    src, out = f"src-{uniq}", f"agg-{uniq}"
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, out, 1)
    produce(broker.bootstrap, src, 200)

    def write(batch_df, batch_id):
        for _ in range(2):  # the second call is what a replay of the same batch does
            (batch_df.selectExpr("cast(k as binary) as key", "cast(cast(n as string) as binary) as value")
             .write.format("oncelog").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", out)
             .option("txnAppId", f"agg-{uniq}").option("txnVersion", batch_id).mode("append").save())

    df = stream_to(spark, broker.bootstrap, src, None).selectExpr("cast(value as string) as v") \
        .selectExpr("substr(v, length(v), 1) as k").groupBy("k").count().withColumnRenamed("count", "n")
    q = (df.writeStream.outputMode("update").foreachBatch(write).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(120)
        assert q.exception() is None
        batches = len(q.recentProgress)
    finally:
        q.stop()
    rows = consume_all(broker.bootstrap, out, 1, expected=10_000, timeout=8, isolation="read_committed")[0]
    finals = {}
    for _off, key, value, _h in rows:
        finals[key] = int(value)
    assert sum(finals.values()) == 200 and len(finals) == 10
    # each batch's update rows once, not twice
    assert len(rows) <= 10 * batches
    seen = [(k, v) for _o, k, v, _h in rows]
    assert len(seen) == len(set(seen)) or len(rows) < 20 * batches


def test_batch_write_without_txn_app_id_needs_at_least_once(spark, broker, uniq):
    df = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(Exception, match="txnAppId"):
        df.write.format("oncelog").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", f"t-{uniq}").mode("append").save()
    create_topic(broker.bootstrap, f"t-{uniq}", 1)
    (df.write.format("oncelog").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", f"t-{uniq}")
     .option("deliveryGuarantee", "at-least-once").mode("append").save())
    rows = consume_all(broker.bootstrap, f"t-{uniq}", 1, expected=1, timeout=20)[0]
    assert [v for _o, _k, v, _h in rows] == [b"a"]


# ---------------------------------------------------------------------------------------------
# The commit protocol against a real broker (no Spark needed)


def open_txn(client, txn_id, topic, values, timeout_ms=60_000):
    import pyarrow as pa

    p = TransactionalProducer(client, txn_id, timeout_ms)
    p.init()
    p.add_partitions([(topic, 0)])
    recs = encode_records(None, pa.array(values, pa.binary()), None)
    p.send(topic, 0, encode_batch(recs, len(values), timestamp_ms=int(time.time() * 1000), producer_id=p.producer_id,
                                  producer_epoch=p.producer_epoch, base_sequence=p.next_sequence(topic, 0, len(values)),
                                  transactional=True), len(values))
    p.flush()
    return p


def test_stale_run_is_fenced_and_zombie_transactions_are_swept(broker, uniq):
    """The sweep aborts the query's orphans, pooled ids (``<prefix>-g<gen>-<task>-<attempt>``)
    and ids of the earlier per-run naming (``<prefix>-<run>-<task>-<attempt>``) alike, and
    nothing of another query whose prefix continues this one's."""
    topic = f"out-{uniq}"
    create_topic(broker.bootstrap, topic, 1)
    client = KafkaClient(broker.bootstrap)
    prefix = f"q-{uniq}"
    proto = CommitProtocol(client, broker.bootstrap, f"commits-{uniq}", prefix, 60_000)
    t1 = open_txn(client, f"{prefix}-g0-0-0", topic, [b"a1", b"a2"])
    zombies = [open_txn(client, f"{prefix}-g0-1-1", topic, [b"zombie"]),  # a failed attempt of this run
               open_txn(client, f"{prefix}-0a1b2c3d-1-0", topic, [b"old"])]  # an earlier version's run
    other = open_txn(client, f"{prefix}-eu-g0-0-0", topic, [b"other query"])
    assert proto.commit(5, [Txn(t1.transactional_id, t1.producer_id, t1.producer_epoch)], "run1") == "committed"
    # The zombies' transactions were swept: their next write is fenced, their records never visible.
    for zombie in zombies:
        with pytest.raises(KafkaProtocolError) as err:
            zombie.client.add_partitions_to_txn(zombie.transactional_id, zombie.producer_id, zombie.producer_epoch,
                                                [(topic, 0)])
        assert err.value.code in (ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch)
    states = {tid: s for tid, _pid, s in client.list_transactions()}
    assert states[other.transactional_id] == "Ongoing", "the sweep aborted another query's transaction"
    assert client.end_txn(other.transactional_id, other.producer_id, other.producer_epoch, commit=False) == ErrorCode.none
    # A stale run commits batch 4 late: fenced, its output aborted, and an error raised.
    stale = open_txn(client, f"{prefix}-g1-0-0", topic, [b"stale"])
    with pytest.raises(StaleRunError):
        proto.commit(4, [Txn(stale.transactional_id, stale.producer_id, stale.producer_epoch)], "run0", generation=1)
    # A replay of batch 5 with new transactions commits nothing new.
    dup = open_txn(client, f"{prefix}-g1-0-0", topic, [b"a1", b"a2"])
    assert proto.commit(5, [Txn(dup.transactional_id, dup.producer_id, dup.producer_epoch)], "run2",
                        generation=1) == "already-committed"
    assert proto.abort(5, []) == "already-committed"  # abort after a commit that took effect undoes nothing
    rows = consume_all(broker.bootstrap, topic, 1, expected=10, timeout=5, isolation="read_committed")[0]
    assert [v for _o, _k, v, _h in rows] == [b"a1", b"a2"]
    # The decision records the run that decided batch 5 and its generation of the pool.
    assert proto.log.latest(prefix).runs.runs == (("run1", 0),)
    client.close()


def test_decided_batch_aborted_by_the_coordinator_fails_loudly(broker, uniq):
    """The restart came after transaction.timeout.ms: the coordinator aborted a decided
    transaction. The roll-forward must fail with "batch N lost", never report success."""
    topic = f"out-{uniq}"
    create_topic(broker.bootstrap, topic, 1)
    client = KafkaClient(broker.bootstrap)
    prefix = f"q-{uniq}"
    proto = CommitProtocol(client, broker.bootstrap, f"commits-{uniq}", prefix, 60_000)
    t = open_txn(client, f"{prefix}-g0-0-0", topic, [b"x"], timeout_ms=1000)
    proto.log.ensure_topic()
    proto.decider.init()
    proto._write(Decision(7, PENDING, [Txn(t.transactional_id, t.producer_id, t.producer_epoch)]))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # wait for the coordinator's timeout abort
        states = {tid: s for tid, _pid, s in client.list_transactions()}
        if states.get(t.transactional_id) not in ("Ongoing", "PrepareAbort"):
            break
        time.sleep(0.2)
    with pytest.raises(BatchLostError, match="batch 7 lost"):
        CommitProtocol(client, broker.bootstrap, f"commits-{uniq}", prefix, 60_000).commit(8, [])
    client.close()


def test_an_abort_finishes_an_earlier_decided_batch_before_its_sweep(broker, uniq):
    """A crashed run left batch 3 decided with a transaction still open; the next run's batch 4
    is given up (Spark's abort()). The abort's orphan sweep must not abort batch 3's transaction:
    it rolls the decision forward first, so batch 3's rows become visible and 4's do not."""
    topic = f"out-{uniq}"
    create_topic(broker.bootstrap, topic, 1)
    client = KafkaClient(broker.bootstrap)
    prefix = f"q-{uniq}"
    proto = CommitProtocol(client, broker.bootstrap, f"commits-{uniq}", prefix, 60_000)
    decided = open_txn(client, f"{prefix}-g0-0-0", topic, [b"batch3"])
    proto.log.ensure_topic()
    proto.decider.init()
    proto._write(Decision(3, PENDING, [Txn(decided.transactional_id, decided.producer_id, decided.producer_epoch)],
                          "run0"))
    given_up = open_txn(client, f"{prefix}-g1-0-0", topic, [b"batch4"])
    assert proto.abort(4, [Txn(given_up.transactional_id, given_up.producer_id, given_up.producer_epoch)]) == "aborted"
    rows = consume_all(broker.bootstrap, topic, 1, expected=2, timeout=5, isolation="read_committed")[0]
    assert [v for _o, _k, v, _h in rows] == [b"batch3"]
    assert proto.log.latest(prefix).state == "done"
    client.close()


def test_a_batch_is_complete_before_its_barrier_ends(broker, uniq):
    complete_before_barrier_ends(broker, uniq, rounds=10)


def complete_before_barrier_ends(broker, uniq: str, rounds: int) -> int:
    """At the protocol level: a broker answers EndTxn once the commit is
    prepared and writes the COMMIT markers after (Apache Kafka: DescribeTransactions right after
    the answer says PrepareCommit, every time on three nodes, for tens of milliseconds). The
    commit must therefore not end the barrier on EndTxn's answer: when ``commit()`` returns, every
    task transaction of the batch is CompleteCommit, and the barrier's abort came after. Returns
    in how many of ``rounds`` bare commits the broker answered EndTxn before the markers."""
    topic = f"out-{uniq}"
    create_topic(broker.bootstrap, topic, 2)
    client = KafkaClient(broker.bootstrap)
    prefix = f"q-{uniq}"
    prepared_at_answer = 0
    try:
        for b in range(rounds):
            barrier = open_barrier(client, prefix, topic, 60_000)
            txns = [open_txn(client, f"{prefix}-g0-{t}-0", topic, [b"r%d" % b]) for t in range(2)]
            proto = CommitProtocol(client, broker.bootstrap, f"commits-{uniq}", prefix, 60_000)
            assert proto.commit(b, [Txn(p.transactional_id, p.producer_id, p.producer_epoch) for p in txns], "run",
                                barrier=barrier) == "committed"
            states = client.describe_transactions([p.transactional_id for p in txns] + [barrier[0]])
            for p in txns:
                d = states[p.transactional_id]
                assert (d.state, d.producer_id, d.producer_epoch) == ("CompleteCommit", p.producer_id,
                                                                      p.producer_epoch), d
            assert states[barrier[0]].state in ("PrepareAbort", "CompleteAbort"), states[barrier[0]]
            proto.close()
            # The window itself: a bare EndTxn, then at once DescribeTransactions.
            probe = open_txn(client, f"{prefix}-probe", topic, [b"p"])
            assert client.end_txn(probe.transactional_id, probe.producer_id, probe.producer_epoch, True) == ErrorCode.none
            if client.describe_transactions([probe.transactional_id])[probe.transactional_id].state == "PrepareCommit":
                prepared_at_answer += 1
    finally:
        client.close()
    print(f"EndTxn answered before the markers were written in {prepared_at_answer} of {rounds} commits")
    return prepared_at_answer


# ---------------------------------------------------------------------------------------------
# Save modes and kafka.compression.type


def test_overwrite_save_mode_is_refused_as_by_sparks_kafka_sink(spark, broker, uniq):
    topic = f"ow-{uniq}"
    create_topic(broker.bootstrap, topic, 1)
    df = spark.createDataFrame([("a",)], "value string")
    w = (df.write.format("oncelog").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic)
         .option("deliveryGuarantee", "at-least-once"))
    with pytest.raises(Exception, match="Save mode Overwrite not allowed for oncelog") as err:
        w.mode("overwrite").save()
    assert 'mode("append")' in str(err.value)
    w.mode("append").save()
    assert [v for _o, _k, v, _h in consume_all(broker.bootstrap, topic, 1, expected=1, timeout=20)[0]] == [b"a"]


def _stored_codecs(bootstrap: str, topic: str, consumed: dict[int, list]) -> set[int]:
    """The compression codec (batch header attributes) of every stored batch holding a record
    that was consumed: the sink's rows, not the exactly-once sink's aborted one-record barrier
    batches, which no read_committed reader returns."""
    from oncelog.protocol.records import scan_batches

    client = KafkaClient(bootstrap)
    try:
        fetched = client.fetch({(topic, p): 0 for p in consumed}, isolation_level=0, max_wait_ms=10)
    finally:
        client.close()
    codecs = set()
    for (_t, p), pf in fetched.items():
        offsets = {o for o, _k, _v, _h in consumed[p]}
        for h in scan_batches(pf.records):
            if any(h.base_offset + d in offsets for d in range(h.last_offset_delta + 1)):
                codecs.add(h.compression)
    assert sum(len(v) for v in consumed.values()) > 0
    return codecs


@pytest.mark.parametrize("codec,codec_id", [("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)])
def test_compression_type_compresses_what_the_sink_writes(spark, broker, uniq, codec, codec_id):
    topic = f"z-{codec}-{uniq}"
    create_topic(broker.bootstrap, topic, 2)
    rows = [(f"k{i}", f"value {i} " * (i % 13)) for i in range(400)]
    (spark.createDataFrame(rows, "key string, value string").write.format("oncelog")
     .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic)
     .option("deliveryGuarantee", "at-least-once").option("kafka.compression.type", codec).mode("append").save())
    got = consume_all(broker.bootstrap, topic, 2, expected=400, timeout=30)  # librdkafka decompresses them
    assert _stored_codecs(broker.bootstrap, topic, got) == {codec_id}
    assert sorted((k.decode(), v.decode()) for recs in got.values() for _o, k, v, _h in recs) == sorted(rows)


def test_compression_in_exactly_once_streaming_writes(spark, broker, tmp_path, uniq):
    src, out = f"src-{uniq}", f"zout-{uniq}"
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, out, 2)
    produce(broker.bootstrap, src, 200)
    df = stream_to(spark, broker.bootstrap, src, None).selectExpr("key", "value")
    run_available_now(df, broker.bootstrap, str(tmp_path / "ck"), topic=out, **{"kafka.compression.type": "lz4",
                                                                                   "kafka.compression.lz4.level": "3"})
    got = consume_all(broker.bootstrap, out, 2, expected=200, timeout=30, isolation="read_committed")
    assert _stored_codecs(broker.bootstrap, out, got) == {3}
    assert sorted(v for recs in got.values() for _o, _k, v, _h in recs) == sorted(b"v%d" % i for i in range(200))
