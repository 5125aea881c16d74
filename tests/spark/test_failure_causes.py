"""A query that fails because its broker went away is explained in one plain line, from the
real exception Spark raises (recovery messages a person can read).

Two queries as the demo's job runs them, on a real broker that is SIGKILLed under them: a stream
written through the connector's streaming sink, and one written from ``foreachBatch`` with the
batch writer. Each one's :class:`StreamingQueryException` goes through
:func:`oncelog.pipeline.causes.explain`: the cause is "the broker ... went away", on one line, with
no traceback, while the exception's own text is the long one (kept for driver.log).
"""

from __future__ import annotations

import time

import pytest

from oncelog.pipeline.causes import MAX, explain
from tests.helpers import create_topic
from tests.spark.source_helpers import produce

TIMEOUT = 120


def _no_traceback(line: str) -> None:
    assert "\n" not in line and len(line) <= MAX, line
    for fragment in ("Traceback", 'File "', "\tat ", "  at ", "^^^"):
        assert fragment not in line, line


def test_a_broker_kill_under_two_queries_is_explained_in_one_line(spark, broker, uniq, tmp_path):
    src, out, agg = f"causes-in-{uniq}", f"causes-out-{uniq}", f"causes-agg-{uniq}"
    for t in (src, out, agg):
        create_topic(broker.bootstrap, t, 1)
    produce(broker.bootstrap, src, 50)
    fast = {"kafka.bootstrap.servers": broker.bootstrap, "fetchOffset.numRetries": "1",
            "fetchOffset.retryIntervalMs": "100"}

    def source():
        return spark.readStream.format("oncelog").options(**fast).option("subscribe", src).option(
            "startingOffsets", "earliest").load()

    def write_batch(df, batch_id):
        (df.selectExpr("value").write.format("oncelog").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("topic", agg).option("txnAppId", f"causes-{uniq}").option("txnVersion", batch_id)
         .mode("append").save())

    q1 = (source().selectExpr("value").writeStream.format("oncelog").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("topic", out).option("checkpointLocation", str(tmp_path / "ck1"))
          .trigger(processingTime="200 milliseconds").start())
    q2 = (source().writeStream.foreachBatch(write_batch).option("checkpointLocation", str(tmp_path / "ck2"))
          .trigger(processingTime="200 milliseconds").start())
    try:
        deadline = time.time() + TIMEOUT
        while time.time() < deadline and not all(any(p["numInputRows"] for p in q.recentProgress) for q in (q1, q2)):
            assert q1.isActive and q2.isActive, (q1.exception(), q2.exception())
            time.sleep(0.2)
        broker.kill()
        for q in (q1, q2):
            deadline = time.time() + TIMEOUT
            while q.isActive and time.time() < deadline:
                time.sleep(0.2)
            assert not q.isActive, "the query went on without its broker"
        texts = [str(q.exception()) for q in (q1, q2)]
    finally:
        for q in (q1, q2):
            q.stop()
    for text in texts:
        assert "Traceback" in text or "\n" in text, text[:500]  # Spark's own text is the long one
        cause = explain(text, bootstrap=broker.bootstrap)
        assert cause.kind == "broker-unreachable", (cause, text[:3000])
        assert f"the broker at {broker.bootstrap} went away" in cause.text, cause
        _no_traceback(cause.text)


@pytest.fixture
def broker(broker_factory):
    return broker_factory()
