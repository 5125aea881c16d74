"""What every Spark Python worker of the connector pays at start-up (driver restart).

A (re)started query starts about ten Python processes one after another before its first
micro-batch (the lookup of data sources, ``schema()``, the reader's and writers' factories, the
tasks, the commit runners), so what each imports is on the restart's critical path:

* Spark's workers import PySpark from site-packages (compiled bytecode), not from
  ``pyspark.zip``, where Python recompiles PySpark's sources in every process
  (:func:`oncelog.spark.session.worker_spark_home`);
* ``format("oncelog")``'s module imports no Kafka client, Arrow or pandas;
* the connector's Arrow code never makes pyarrow import pandas (~0.2 s per process).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.e2e  # starts Python processes


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_spark_workers_import_pyspark_from_site_packages(spark):
    import pyspark

    files = set(spark.sparkContext.parallelize(range(4), 2)
                .map(lambda _: (__import__("pyspark").__file__, __import__("sys").executable)).collect())
    assert len(files) == 1, files
    (path, python), = files
    assert ".zip" not in path, f"Spark's Python workers import PySpark from its zip: {path}"
    assert os.path.realpath(path) == os.path.realpath(pyspark.__file__), (path, pyspark.__file__)
    assert os.path.realpath(python) == os.path.realpath(sys.executable)


def test_worker_spark_home_leaves_out_only_the_zips(tmp_path):
    out = _run(f"""
        import os, sys
        os.environ.pop("SPARK_HOME", None)
        os.environ["XDG_CACHE_HOME"] = {str(tmp_path)!r}
        import pyspark
        from oncelog.spark.session import worker_spark_home, _spark_home
        home = worker_spark_home()
        package = os.path.dirname(os.path.realpath(pyspark.__file__))
        assert home and home.startswith({str(tmp_path)!r}), home
        assert sorted(os.listdir(home)) == sorted(n for n in os.listdir(package) if n not in ("python", "__pycache__"))
        assert os.path.realpath(os.path.join(home, "jars")) == os.path.join(package, "jars")
        assert worker_spark_home() == home  # made once
        with _spark_home(home):
            assert os.environ["SPARK_HOME"] == home
        assert "SPARK_HOME" not in os.environ  # not inherited by this process's other children
        os.environ["SPARK_HOME"] = "/opt/spark"  # the user's own Spark: left alone
        assert worker_spark_home() is None
        del os.environ["SPARK_HOME"]
        os.environ["PYSPARK_PYTHON"] = "/usr/bin/python3-elsewhere"  # workers on another interpreter
        assert worker_spark_home() is None
        print("ok")
    """)
    assert out == "ok"


def test_the_data_source_module_imports_no_client_arrow_or_pandas():
    out = _run("""
        import sys
        import oncelog.spark.datasource, pyspark_oncelog
        print(sorted({"pandas", "pyarrow", "kio", "confluent_kafka", "oncelog.client.kafka"} & set(sys.modules)))
    """)
    assert out == "[]", f"imported by format('oncelog')'s module: {out}"


def test_the_client_imports_crc32c_only_to_compute_one():
    # crc32c's __init__ walks sys.path through importlib.metadata: Spark's jar, in a worker.
    out = _run("""
        import sys
        import oncelog.client.kafka, oncelog.spark.sink, oncelog.spark.source
        print("crc32c" in sys.modules)
    """)
    assert out == "False"


def test_the_connectors_arrow_code_does_not_import_pandas():
    out = _run("""
        import sys
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        import oncelog.spark.source, oncelog.spark.sink
        from oncelog.client.recordcodec import (HEADER_TYPE, binaries, column, decode_batches, encode_batch,
                                                encode_records)
        keys, values = binaries([b"k1", b"k2", b"k3"]), binaries([b"v1", b"v2", b"v3"])
        entries = pa.StructArray.from_arrays([binaries([b"h", b"h", b"h"]).cast(pa.string()), binaries([b"1", b"2", b"3"])],
                                             fields=list(HEADER_TYPE.value_type))
        headers = pa.ListArray.from_arrays(column(np.array([0, 1, 2, 3], dtype=np.int32)), entries, type=HEADER_TYPE)
        batch = encode_batch(encode_records(keys, values, headers), 3, timestamp_ms=1)
        decoded = decode_batches(batch, start_offset=0, end_offset=3, include_headers=True)
        assert decoded.values.to_pylist() == [b"v1", b"v2", b"v3"], decoded.values
        assert decoded.headers[2].as_py() == [{"key": "h", "value": b"3"}]
        empty = decode_batches(b"", start_offset=0, end_offset=0, include_headers=True)
        assert len(empty) == 0 and empty.headers.type == HEADER_TYPE
        ts = column(np.array([1, 2], dtype=np.int64) * 1000, pa.timestamp("us", tz="UTC"))
        assert ts.type == pa.timestamp("us", tz="UTC") and ts[1].value == 2000
        topics = binaries([b"a", b"b", b"a"]).cast(pa.string())
        uniq = pc.unique(topics)
        assert pc.equal(topics, uniq[0]).to_pylist() == [True, False, True]
        print("pandas" in sys.modules)
    """)
    assert out == "False", "the connector's Arrow code made pyarrow import pandas"
