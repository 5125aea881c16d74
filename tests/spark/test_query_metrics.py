"""The driver's query metrics (oncelog.spark.metrics): a short stream from an oncelog topic to an
oncelog topic with the listener registered, the endpoint scraped with prometheus_client's parser,
every figure compared with what happened (progress events, records produced, an independent
read_committed consumer); then a batch re-executed from the checkpoint, which the sink's commit
log shows as already committed; then the query's series dropped after it terminated."""

from __future__ import annotations

import os
import time
import urllib.request

import confluent_kafka as ck
import pytest
from prometheus_client.parser import text_string_to_metric_families

from oncelog.spark.metrics import (MAX_BATCHES_PER_PREFIX, QueryMetrics, _Hist, _is_loopback, _newest_timestamp,
                                   _parse_offsets, _terminated_outcome, serve_query_metrics)

from ..helpers import consume_all, create_topic

COMMITTED = 120  # records in committed transactions
ABORTED = 30  # records in an aborted one: never read


def scrape(url: str) -> dict:
    """{(name, frozenset(labels)): value} of every sample."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def value(samples: dict, name: str, **labels) -> float | None:
    want = set(labels.items())
    found = [v for (n, ls), v in samples.items() if n == name and want <= ls]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def total(samples: dict, name: str, **labels) -> float:
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def produce_transactions(bootstrap: str, topic: str) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"gen-{topic}", "linger.ms": 5})
    p.init_transactions(30)
    for i, commit in enumerate((True, False, True)):
        p.begin_transaction()
        n = ABORTED if not commit else COMMITTED // 2
        for j in range(n):
            p.produce(topic, key=b"k%d-%d" % (i, j), value=b"v%d-%d" % (i, j), partition=j % 2)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)


def wait_for(cond, timeout: float, what: str, refresh=None):
    deadline = time.monotonic() + timeout
    while True:
        if refresh is not None:
            refresh()
        got = cond()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def run_query(spark, bootstrap, src, out, ckpt, name, commit_log):
    df = (spark.readStream.format("oncelog").option("kafka.bootstrap.servers", bootstrap).option("subscribe", src)
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 50).load())
    q = (df.selectExpr("key", "value").writeStream.queryName(name).format("oncelog")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", out).option("commitLogTopic", commit_log)
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(90), "query did not finish"
        assert q.exception() is None, q.exception()
    finally:
        q.stop()
    return q


def test_query_metrics_equal_what_happened(spark, broker, tmp_path, uniq):
    bootstrap = broker.bootstrap
    src, out, commit_log, name = f"msrc-{uniq}", f"mout-{uniq}", f"mcommits-{uniq}", f"metrics-{uniq}"
    create_topic(bootstrap, src, 2)
    create_topic(bootstrap, out, 2)
    produce_transactions(bootstrap, src)
    ckpt = str(tmp_path / "ck")
    m = serve_query_metrics(spark, bootstrap=bootstrap, commit_log_topic=commit_log, poll_interval=0.5,
                            txn_interval=1.0, forget_after=3.0)
    try:
        assert m.address[0] == "127.0.0.1" and m.address[1] > 0
        assert m.url == f"http://127.0.0.1:{m.address[1]}/metrics"
        q = run_query(spark, bootstrap, src, out, ckpt, name, commit_log)
        qid = str(q.id)
        progress = q.recentProgress
        with_data = [p for p in progress if p["numInputRows"] > 0]
        assert sum(p["numInputRows"] for p in progress) == COMMITTED
        assert len(with_data) >= 3  # 50 offsets per trigger; markers and aborted records take offsets too

        def settled():
            s = scrape(m.url)
            done = (value(s, "oncelog_spark_query_active", query_id=qid) == 0
                    and value(s, "oncelog_spark_batches_total", query_id=qid) == len(progress)
                    # measured for the newest batch with input at each round of the poller: some of them
                    and 1 <= (value(s, "oncelog_spark_freshness_seconds_count", query_id=qid) or 0) <= len(with_data)
                    and total(s, "oncelog_spark_sink_batches_total", query_id=qid) == len(progress)
                    and value(s, "oncelog_spark_open_transactions", query_id=qid, kind="task") == 0
                    and total(s, "oncelog_spark_open_transactions", query_id=qid) == 0)
            return s if done else None

        s = wait_for(settled, 30, "the listener's and the poller's figures", refresh=m.refresh)
        ql = {"query": name, "query_id": qid}
        # Spark's figures, from the progress events
        assert value(s, "oncelog_spark_batches_total", **ql) == len(progress)
        assert value(s, "oncelog_spark_empty_batches_total", **ql) == len(progress) - len(with_data)
        assert value(s, "oncelog_spark_input_rows_total", **ql) == COMMITTED
        assert total(s, "oncelog_spark_source_input_rows_total", **ql) == COMMITTED
        assert value(s, "oncelog_spark_batch_duration_seconds_count", **ql) == len(progress)
        assert value(s, "oncelog_spark_add_batch_duration_seconds_count", **ql) == len(progress)
        assert value(s, "oncelog_spark_last_batch_id", **ql) == progress[-1]["batchId"]
        assert value(s, "oncelog_spark_query_runs_total", **ql) == 1
        # offsets: the last batch ended at each partition's last stable offset; nothing left behind
        client = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uniq}",
                              "isolation.level": "read_committed"})
        try:
            for part in (0, 1):
                _low, high = client.get_watermark_offsets(ck.TopicPartition(src, part), timeout=10)
                assert value(s, "oncelog_spark_source_end_offset", topic=src, partition=str(part), **ql) == high
                assert value(s, "oncelog_spark_source_lag_offsets", topic=src, partition=str(part), **ql) == 0
        finally:
            client.close()
        # the sink's figures, from its commit log: every batch with input committed by this run
        records = consume_all(bootstrap, out, 2, expected=COMMITTED, timeout=30, isolation="read_committed")
        assert sum(len(r) for r in records.values()) == COMMITTED
        assert value(s, "oncelog_spark_sink_output_records_total", **ql) == COMMITTED
        assert value(s, "oncelog_spark_sink_committed_batches_total", **ql) == len(with_data)
        assert value(s, "oncelog_spark_sink_batches_total", outcome="committed", **ql) == len(with_data)
        assert value(s, "oncelog_spark_sink_batches_total", outcome="no-output", **ql) == len(progress) - len(with_data)
        assert value(s, "oncelog_spark_sink_batches_total", outcome="already-committed", **ql) == 0
        assert value(s, "oncelog_spark_sink_commit_seconds_count", **ql) == len(with_data)
        assert 0 < value(s, "oncelog_spark_sink_commit_seconds_sum", **ql) < 30
        # freshness: produced before the query started, read within a minute
        fresh = value(s, "oncelog_spark_last_batch_freshness_seconds", **ql)
        assert 0 < fresh < 90
        assert value(s, "oncelog_spark_query_terminations_total", outcome="stopped") >= 1
        assert total(s, "oncelog_spark_metrics_errors_total") == 0

        # A batch re-executed from the checkpoint (Spark's commit log lost its entry, as after a
        # crash between the sink's commit and Spark's): the sink recognises it as decided by the
        # earlier run and writes nothing; the endpoint counts it as already committed.
        last = progress[-1]["batchId"]
        for f in (str(last), f".{last}.crc"):  # Hadoop's checksum file goes with it
            os.remove(os.path.join(ckpt, "commits", f))
        q2 = run_query(spark, bootstrap, src, out, ckpt, name, commit_log)
        assert str(q2.id) == qid
        replay = q2.recentProgress
        assert [p["batchId"] for p in replay][0] == last

        def replayed():
            s = scrape(m.url)
            done = (value(s, "oncelog_spark_query_active", query_id=qid) == 0
                    and value(s, "oncelog_spark_batches_total", query_id=qid) == len(progress) + len(replay)
                    and total(s, "oncelog_spark_sink_batches_total", query_id=qid) == len(progress) + len(replay))
            return s if done else None

        s = wait_for(replayed, 30, "the re-executed batch", refresh=m.refresh)
        assert value(s, "oncelog_spark_sink_batches_total", outcome="already-committed", **ql) == 1
        assert value(s, "oncelog_spark_sink_output_records_total", **ql) == COMMITTED  # nothing written again
        assert value(s, "oncelog_spark_query_runs_total", **ql) == 2
        assert value(s, "oncelog_spark_input_rows_total", **ql) == COMMITTED + sum(p["numInputRows"] for p in replay)
        records = consume_all(bootstrap, out, 2, expected=COMMITTED + 1, timeout=3, isolation="read_committed")
        assert sum(len(r) for r in records.values()) == COMMITTED

        # forget_after (3 s) after the termination, the query's series are gone; the totals stay
        s = wait_for(lambda: (lambda s: s if value(s, "oncelog_spark_query_active", query_id=qid) is None else None)(
            scrape(m.url)), 15, "the query's series to go")
        assert not [k for k in s if ("query_id", qid) in k[1]]
        assert value(s, "oncelog_spark_query_terminations_total", outcome="stopped") >= 2
    finally:
        m.close()
    with pytest.raises(OSError):
        urllib.request.urlopen(m.url, timeout=2)
    m.close()  # idempotent


def test_helpers():
    h = _Hist((0.1, 1.0))
    for v in (0.05, 0.1, 0.5, 2.0):
        h.observe(v)
    assert h.buckets() == [("0.1", 2), ("1.0", 3), ("+Inf", 4)] and h.count == 4 and h.sum == pytest.approx(2.65)
    assert _parse_offsets('{"t":{"0":5,"1":7}}') == {("t", 0): 5, ("t", 1): 7}
    assert _parse_offsets("None") is None and _parse_offsets('{"logOffset": 3}') is None
    assert _parse_offsets("12") is None
    assert _terminated_outcome(None) == "stopped"
    assert _terminated_outcome("... StaleRunError: batch 3 ...") == "fenced"
    assert _terminated_outcome("... BatchLostError ...") == "batch-lost"
    assert _terminated_outcome("boom") == "failed"


# -- the poller on an in-memory cluster (no broker, no Spark) ----------------------------------


class FakeCluster:
    """Stands for the poller's KafkaClient: partitions as lists of record batches (real magic-v2
    bytes, base offsets set on append), Fetch answered as Apache Kafka answers it (from the batch
    holding the offset, cut at ``partition_max_bytes``, inside a batch if need be); every Fetch's
    positions recorded."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, int], list[bytes]] = {}
        self.aborted: dict[tuple[str, int], list[tuple[int, int]]] = {}
        self.fetches: list[dict] = []
        self.closed = False

    def append(self, tp, batch: bytes) -> int:
        from oncelog.protocol.records import HEADER

        log = self.logs.setdefault(tp, [])
        base = self.end(tp)
        buf = bytearray(batch)
        buf[:8] = base.to_bytes(8, "big", signed=True)
        log.append(bytes(buf))
        return base + HEADER.unpack_from(buf, 0)[6] + 1

    def end(self, tp) -> int:
        from oncelog.protocol.records import HEADER

        log = self.logs.get(tp)
        if not log:
            return 0
        h = HEADER.unpack_from(log[-1], 0)
        return h[0] + h[6] + 1

    def metadata(self, topics):
        from types import SimpleNamespace

        from kio.schema.errors import ErrorCode

        have = {t for t, _ in self.logs}
        return {t: SimpleNamespace(error=ErrorCode.none, partitions={p: 0 for tt, p in self.logs if tt == t})
                for t in (topics if topics is not None else have) if t in have}

    def list_offsets(self, specs, isolation_level):
        from oncelog.client.kafka import EARLIEST

        return {tp: (0 if spec == EARLIEST else self.end(tp), -1) for tp, spec in specs.items()}

    def fetch(self, positions, *, isolation_level, max_wait_ms=100, max_bytes=50 << 20,
              partition_max_bytes=8 << 20):
        from kio.schema.errors import ErrorCode

        from oncelog.client.kafka import PartitionFetch
        from oncelog.protocol.records import HEADER

        self.fetches.append(dict(positions))
        out = {}
        for tp, pos in positions.items():
            batches = [b for b in self.logs.get(tp, ()) if HEADER.unpack_from(b, 0)[0] + HEADER.unpack_from(b, 0)[6]
                       >= pos]
            blob = b"".join(batches)[:partition_max_bytes]
            out[tp] = PartitionFetch(ErrorCode.none, self.end(tp), self.end(tp), 0, list(self.aborted.get(tp, ())),
                                     blob)
        return out

    def close(self) -> None:
        self.closed = True


def _batch(n: int, ts: int, *, pid: int = -1, txn: bool = False, value: bytes = b"v", keys=None) -> bytes:
    from oncelog.protocol.records import ATTR_TRANSACTIONAL, build_batch

    return build_batch([((keys[i] if keys else None), value) for i in range(n)], timestamp_ms=ts, producer_id=pid,
                       producer_epoch=0 if pid >= 0 else -1, attributes=ATTR_TRANSACTIONAL if txn else 0)


def _marker(pid: int, commit: bool, ts: int) -> bytes:
    from oncelog.protocol.records import build_control_batch

    return build_control_batch(pid, 0, commit, 0, ts)


def _metrics(cluster, monkeypatch, **kw) -> QueryMetrics:
    monkeypatch.setattr("oncelog.client.kafka.KafkaClient", lambda *a, **k: cluster)
    args = dict(bootstrap="fake:9092", kafka=None, commit_log_topic="commits", prefixes=None, poll_interval=1.0,
                txn_interval=60.0, forget_after=60.0)
    args.update(kw)
    return QueryMetrics(**args)


def _progress(qid: str, run_id: str, batch_id: int, rows: int = 1, sources=(), end_s: float = 1_700_000_000.0):
    from datetime import datetime, timezone
    from types import SimpleNamespace

    ts = datetime.fromtimestamp(end_s - 0.5, timezone.utc).isoformat().replace("+00:00", "Z")
    return SimpleNamespace(id=qid, name="q", runId=run_id, numInputRows=rows, batchId=batch_id,
                           durationMs={"triggerExecution": 500}, timestamp=ts, sources=list(sources),
                           sink=SimpleNamespace(description="PythonTable@1a2b", numOutputRows=rows))


def test_commit_log_catch_up_counts_every_done_decision(monkeypatch):
    """More decisions of one prefix in one catch-up read than are remembered: each DONE is
    counted as it is decoded, and each batch's progress event gets its outcome."""
    import json

    cluster = FakeCluster()
    m = _metrics(cluster, monkeypatch)
    run_id = "abcdef12-0000-0000-0000-000000000000"
    m.started("q1", run_id, "q")
    m.poll()  # no commit log yet: everything that appears is this endpoint's to count
    n = MAX_BATCHES_PER_PREFIX + 36  # fewer than the progress events kept waiting (MAX_PENDING)
    for b in range(n):
        m.progress(_progress("q1", run_id, b, rows=b + 1))
        for state, ts in (("pending", 1_000 * b), ("done", 1_000 * b + 20)):
            value = json.dumps({"batchId": b, "state": state, "runId": run_id[:8], "records": b + 1, "txns": []})
            cluster.append(("commits", 0), _batch(1, ts, value=value.encode(), keys=[b"oncelog-q1"]))
    m.poll()
    q = m.queries["q1"]
    assert m.errors == {}
    assert (q.committed_batches, q.output_records) == (n, n * (n + 1) // 2)
    assert q.outcomes == {"committed": n}
    assert q.commit_hist.count == n and q.commit_hist.sum == pytest.approx(0.02 * n)
    m.poll()  # nothing new: nothing counted twice
    assert (q.committed_batches, q.outcomes) == (n, {"committed": n})


def test_freshness_reads_batch_headers_of_every_partition_in_one_fetch(monkeypatch):
    """The newest record timestamp of a batch's ranges: one Fetch of all its partitions, the
    data batches' header max_timestamp (aborted ones and markers left out, a batch cut by the
    response counted); and the poller measures only the newest batch reported since its last round."""
    import json
    from types import SimpleNamespace

    from oncelog.client.kafka import READ_COMMITTED

    cluster = FakeCluster()
    # 0: an old batch, then one of 400 KB that the Fetch cuts: its header is read, its records not
    cluster.append(("in", 0), _batch(3, 1_000))
    end0 = cluster.append(("in", 0), _batch(2, 5_000, value=b"x" * 200_000))
    # 1: a transaction's batch, aborted (its marker past the range), then a plain record
    cluster.append(("in", 1), _batch(1, 1_000))
    cluster.append(("in", 1), _batch(2, 8_000, pid=9, txn=True))
    end1 = cluster.append(("in", 1), _batch(1, 4_000))
    cluster.append(("in", 1), _marker(9, False, 8_500))
    cluster.aborted[("in", 1)] = [(9, 1)]
    # 2: a committed transaction; its marker (the range's last offset) is newer than its records
    cluster.append(("in", 2), _batch(2, 3_000, pid=8, txn=True))
    end2 = cluster.append(("in", 2), _marker(8, True, 9_500))
    ranges = [("in", 0, 0, end0), ("in", 1, 0, end1), ("in", 2, 0, end2)]
    assert _newest_timestamp(cluster, ranges, READ_COMMITTED) == 5_000
    assert cluster.fetches == [{("in", 0): end0 - 2, ("in", 1): end1 - 2, ("in", 2): end2 - 2}]
    assert _newest_timestamp(cluster, ranges[1:2], READ_COMMITTED) == 4_000
    assert _newest_timestamp(cluster, ranges[2:], READ_COMMITTED) == 3_000
    assert _newest_timestamp(cluster, [("in", 1, end1, end1 + 1)], READ_COMMITTED) is None  # the marker only

    # The poller: of the batches reported since its last round, only the newest is probed.
    cluster.fetches.clear()
    m = _metrics(cluster, monkeypatch)

    def source(start, end):
        return SimpleNamespace(description="oncelog", numInputRows=1, latestOffset=None,
                               startOffset=json.dumps({"in": {"0": start}}), endOffset=json.dumps({"in": {"0": end}}))

    for b, (start, end) in enumerate(((0, 1), (1, 2), (2, end0))):
        m.progress(_progress("q1", "run", b, sources=[source(start, end)], end_s=1_000.0 + b))
    m.poll()
    q = m.queries["q1"]
    assert m.errors == {}
    assert [f for f in cluster.fetches if ("in", 0) in f] == [{("in", 0): end0 - 2}]
    assert q.fresh_hist.count == 1 and q.last_freshness == pytest.approx(1_002.0 - 5.0)
    assert all(i.fresh_done for i in q.pending)


def test_no_client_after_close(monkeypatch):
    """A poll that starts after close() (a late refresh) opens no client that nothing would close."""
    made = []

    def client(*a, **k):
        made.append(FakeCluster())
        return made[-1]

    monkeypatch.setattr("oncelog.client.kafka.KafkaClient", client)
    m = QueryMetrics(bootstrap="fake:9092", kafka=None, commit_log_topic="commits", prefixes=None,
                     poll_interval=1.0, txn_interval=1.0, forget_after=60.0)
    m.poll()
    assert len(made) == 1 and not made[0].closed
    m.close()
    assert made[0].closed and m._client is None
    m.poll(transactions=True)
    assert len(made) == 1 and m._client is None and m.errors == {}


def test_endpoint_beyond_loopback_needs_allow_remote():
    from types import SimpleNamespace

    for host in ("127.0.0.1", "127.0.1.1", "::1", "[::1]", "localhost", "LOCALHOST."):
        assert _is_loopback(host), host
    for host in ("0.0.0.0", "::", "", "10.1.2.3", "example.com", "localhost.example.com"):
        assert not _is_loopback(host), host
        with pytest.raises(ValueError, match="allow_remote=True"):
            serve_query_metrics(None, host=host)
    listeners = []
    spark = SimpleNamespace(streams=SimpleNamespace(addListener=listeners.append, removeListener=listeners.remove))
    m = serve_query_metrics(spark, host="0.0.0.0", allow_remote=True)
    try:
        assert m.address[0] == "0.0.0.0" and len(listeners) == 1
        assert b"oncelog_spark_query_terminations_total" in urllib.request.urlopen(
            f"http://127.0.0.1:{m.address[1]}/metrics", timeout=10).read()
    finally:
        m.close()
    assert listeners == []
