"""A SparkSession configured for this connector on one machine: used by the demo, the
benchmarks and the tests.

Facts behind the settings (measured here, see SPARK-NOTES): Python workers must run the
driver's interpreter, or they start the system ``python3`` without pyarrow; 2 shuffle
partitions instead of 200 make small stateful batches ~10x faster; the UI and the console
progress bar only cost time; binding to 127.0.0.1 keeps everything on loopback.
"""

from __future__ import annotations

import os
import sys


# C1 only and the serial collector: a driver JVM of a short local job starts and warms up sooner.
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def local_session(master: str = "local[2]", *, app_name: str = "oncelog", shuffle_partitions: int = 2,
                  rocksdb: bool = False, java_options: str = "", extra: dict[str, str] | None = None):
    """``java_options``: more options for the driver's JVM, after ours (e.g. the class-data
    archive of ``oncelog.pipeline.jvmcache``)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.python.worker.faulthandler.enabled", "true")
               .config("spark.driver.extraJavaOptions", f"{DRIVER_JAVA_OPTIONS} {java_options}".strip()))
    if rocksdb:
        builder = builder.config("spark.sql.streaming.stateStore.providerClass",
                                 "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    for k, v in (extra or {}).items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    from .datasource import OncelogDataSource

    session.dataSource.register(OncelogDataSource)
    return session
