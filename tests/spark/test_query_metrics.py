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

from oncelog.spark.metrics import _Hist, _parse_offsets, _terminated_outcome, serve_query_metrics

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
                    and value(s, "oncelog_spark_freshness_seconds_count", query_id=qid) == len(with_data)
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
