"""The connector through Spark Connect: a thin client (``pyspark[connect]``, no JVM
of its own) talking gRPC to a local Spark Connect server, the way Databricks-style and
``spark.remote(...)`` users run it.

The server is Spark's own (``org.apache.spark.sql.connect.service.SparkConnectServer`` from the
pip PySpark, what ``sbin/start-connect-server.sh`` runs), started as a separate process with this
interpreter as its Python workers' (PYSPARK_PYTHON) and no PYTHONPATH: it finds
``format("oncelog")`` on its own, the way classic Spark does (``pyspark_oncelog``, looked up in a
Python worker when the server's Spark application starts). The client, another process without
PYTHONPATH either, then:

1. writes 0..999 with ``format("oncelog")`` and no ``register`` call, as an exactly-once batch
   (``txnAppId``/``txnVersion`` 1), writes version 1 again (a retried batch: must change
   nothing) and 1000..1999 as version 2;
2. registers the source explicitly (``spark.dataSource.register``: the other path the README
   gives; on a Connect client it ships the class to the server and installs no release hooks);
3. runs a streaming query oncelog → oncelog (``trigger(availableNow=True)``, a checkpoint);
4. reads the output back through ``format("oncelog")``.

An independent confluent-kafka reader at read_committed then checks both topics: every value
once, none missing, no transaction left open.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from ..helpers import create_topic, free_port, read_committed_to_end, unique

pytestmark = pytest.mark.e2e

PARTITIONS = 2
RECORDS = 2000
SERVER_START_TIMEOUT = 180.0

CLIENT = r"""
import json, sys
from pyspark.sql import SparkSession

url, bootstrap, source, sink, checkpoint = sys.argv[1:6]
spark = SparkSession.builder.remote(url).getOrCreate()
out = {"session": type(spark).__module__}

def write(start, end, version):
    (spark.range(start, end).selectExpr("CAST(id AS STRING) AS value").write.format("oncelog")
     .option("kafka.bootstrap.servers", bootstrap).option("topic", source)
     .option("txnAppId", "connect-test").option("txnVersion", str(version)).mode("append").save())

write(0, 1000, 1)   # format("oncelog") with no register call: the server found the source
write(0, 1000, 1)   # the same batch again (a retry): already committed, nothing written
write(1000, 2000, 2)

from oncelog.spark.datasource import OncelogDataSource
spark.dataSource.register(OncelogDataSource)

q = (spark.readStream.format("oncelog").option("kafka.bootstrap.servers", bootstrap)
     .option("subscribe", source).option("startingOffsets", "earliest").load()
     .selectExpr("key", "value")
     .writeStream.format("oncelog").option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
     .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
q.awaitTermination(240)
out["stream_exception"] = str(q.exception()) if q.exception() else None
out["read_back"] = (spark.read.format("oncelog").option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", sink).load().count())
print(json.dumps(out))
spark.stop()
"""


def _clean_env() -> dict[str, str]:
    """A user's shell: no PYTHONPATH (the package is found as installed), no Spark variables."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("SPARK_", "PYSPARK_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _spark_submit() -> str:
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    """``sc://127.0.0.1:<port>`` of a Spark Connect server process, stopped (its whole process
    group) at the end."""
    pytest.importorskip("grpc", reason="Spark Connect needs pyspark[connect] (pip install 'oncelog[connect]')")
    port = free_port()
    log_path = tmp_path_factory.mktemp("connect") / "server.log"
    env = _clean_env()
    env["PYSPARK_PYTHON"] = sys.executable
    cmd = [_spark_submit(), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
           "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
           "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
           "--conf", f"spark.connect.grpc.binding.port={port}",
           "--conf", "spark.sql.shuffle.partitions=2",
           "--driver-java-options", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while not _listening(port):
            assert proc.poll() is None, f"the Spark Connect server exited:\n{log_path.read_text()[-4000:]}"
            assert time.monotonic() < deadline, f"no Spark Connect server on {port}:\n{log_path.read_text()[-4000:]}"
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_format_oncelog_through_spark_connect_exactly_once(connect_server, broker, tmp_path):
    source, sink = unique("connect-in"), unique("connect-out")
    create_topic(broker.bootstrap, source, partitions=PARTITIONS)
    create_topic(broker.bootstrap, sink, partitions=PARTITIONS)
    done = subprocess.run([sys.executable, "-c", CLIENT, connect_server, broker.bootstrap, source, sink,
                           str(tmp_path / "checkpoint")], capture_output=True, text=True, timeout=600,
                          env=_clean_env(), cwd=tmp_path, stdin=subprocess.DEVNULL)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, f"the Spark Connect client failed:\n{done.stderr[-6000:]}"
    out = json.loads(lines[-1])
    assert out["session"] == "pyspark.sql.connect.session", out  # a Connect client, not a classic session
    assert out["stream_exception"] is None, out["stream_exception"]
    assert out["read_back"] == RECORDS, out

    expected = {str(i) for i in range(RECORDS)}
    for topic in (source, sink):
        raw, at_end = read_committed_to_end(broker.bootstrap, topic, PARTITIONS)
        values = [v.decode() for v in raw]
        duplicates = len(values) - len(set(values))
        assert not duplicates and set(values) == expected, \
            f"{topic}: {len(values)} read for {RECORDS}: {duplicates} duplicates, " \
            f"missing {sorted(expected - set(values), key=int)[:10]}"
        assert all(at_end.values()), f"{topic}: a transaction is still open: {at_end}"
