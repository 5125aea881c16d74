"""A SparkSession configured for this connector on one machine: used by the demo, the
benchmarks and the tests.

Facts behind the settings (measured here, see SPARK-NOTES): Python workers must run the
driver's interpreter, or they start the system ``python3`` without pyarrow; 2 shuffle
partitions instead of 200 make small stateful batches ~10x faster; the UI and the console
progress bar only cost time; binding to 127.0.0.1 keeps everything on loopback.

Python workers importing PySpark from its zip (:func:`worker_spark_home`): Spark puts
``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's) first on every Python worker's PYTHONPATH.
With pip's PySpark, ``SPARK_HOME`` is the installed package, so every worker process (a
(re)started query starts about ten, one after another, before its first micro-batch) imported
PySpark from the zip, where Python keeps no compiled bytecode: it compiled PySpark's sources
again each time, a quarter of all the CPU of a driver restart (py-spy, BENCHMARKS.md "Driver
restart"). The driver's JVM is therefore started with ``SPARK_HOME`` pointing at a copy of the
installation made of symlinks without ``python/``: the zips' paths do not exist, and the workers
import the very same PySpark from site-packages, with its bytecode cache.

The rest of what a Python worker pays at start-up (measured on a fresh clone): with
``PYTHONDONTWRITEBYTECODE`` set and an editable install, no bytecode of oncelog's own modules ever
existed, and every worker compiled the connector again (:func:`compile_connector` writes it once);
and every task worker imported pyarrow, NumPy and the connector after its fork from Spark's
daemon (:mod:`.workerdaemon` imports them once, before forking).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading


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
        # Changelog checkpointing (Spark's advice for RocksDB since 3.4): a micro-batch uploads its
        # changes, a snapshot is zipped every few batches in the background. Without it every
        # micro-batch zips RocksDB's MANIFEST, which grows by a version edit per batch (Spark
        # sets no max_manifest_file_size), and the checkpoint grew ~880 bytes per micro-batch
        # for good: measured ~180 bytes of MANIFEST per batch without, ~17 with
        # (BENCHMARKS.md "A month of micro-batches"). A checkpoint may switch either way.
        builder = (builder
                   .config("spark.sql.streaming.stateStore.providerClass",
                           "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
                   .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true"))
    if _workers_run_this_interpreter():
        # Task workers forked from a daemon that imported the connector already (workerdaemon).
        builder = builder.config("spark.python.daemon.module", "oncelog.spark.workerdaemon")
        compile_connector()
    for k, v in (extra or {}).items():
        builder = builder.config(k, v)
    with _spark_home(worker_spark_home()):
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    from .datasource import OncelogDataSource

    session.dataSource.register(OncelogDataSource)
    return session


def worker_spark_home() -> str | None:
    """A ``SPARK_HOME`` for the driver's JVM under which Python workers import PySpark from
    site-packages instead of ``pyspark.zip``, or None to leave Spark as it is.

    Only for pip's PySpark (the package holds ``jars/`` and ``python/lib/pyspark.zip``), with no
    ``SPARK_HOME`` of the user's, and workers running this interpreter (so the PySpark they
    import is this one). The directory, ``~/.cache/oncelog/spark-home-<key>``, holds a symlink
    to every entry of the package but ``python``; made once, atomically."""
    if os.environ.get("SPARK_HOME") or not _workers_run_this_interpreter():
        return None
    try:
        import pyspark

        from ..cachedir import user_cache

        package = os.path.dirname(os.path.realpath(pyspark.__file__))
        if not (os.path.isdir(os.path.join(package, "jars"))
                and os.path.exists(os.path.join(package, "python", "lib", "pyspark.zip"))):
            return None
        key = hashlib.sha1(f"{package}:{pyspark.__version__}".encode()).hexdigest()[:12]
        home = user_cache(f"spark-home-{key}")
        if os.path.isdir(home):
            return home
        tmp = f"{home}.{os.getpid()}.tmp"
        os.makedirs(tmp)
        for name in os.listdir(package):
            if name not in ("python", "__pycache__"):
                os.symlink(os.path.join(package, name), os.path.join(tmp, name))
        try:
            os.rename(tmp, home)
        except OSError:  # another process made it first
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
        return home if os.path.isdir(home) else None
    except (ImportError, OSError):
        return None


def _workers_run_this_interpreter() -> bool:
    """Whether Spark's Python workers run this interpreter: PYSPARK_PYTHON names one in the same
    directory (the same virtualenv; two virtualenvs' ``python`` resolve to the same binary)."""
    import shutil

    def home(python: str) -> str:
        return os.path.realpath(os.path.dirname(os.path.abspath(shutil.which(python) or python)))

    return home(os.environ.get("PYSPARK_PYTHON", sys.executable)) == home(sys.executable)


_compiled = threading.Event()


def compile_connector(wait: bool = False) -> threading.Thread | None:
    """Write the bytecode of oncelog's modules that lack it, in a background thread (once per
    process), when this interpreter does not write bytecode itself (``PYTHONDONTWRITEBYTECODE``,
    ``-B``), so that Spark's Python workers load the connector compiled.

    pip compiles an installed package's modules when it installs them, whatever
    PYTHONDONTWRITEBYTECODE says; an editable install (``pip install -e .``, the README's commands)
    has none, and then each of the ~ten Python processes a (re)started query starts compiled the
    ~30 modules the connector imports (~0.2 s of CPU each) again. ``compileall`` writes them where
    Python looks for them (``__pycache__`` beside the sources, or ``sys.pycache_prefix``); an
    up-to-date file is left alone, a read-only tree is skipped. ``wait``: join the thread."""
    if not sys.dont_write_bytecode or _compiled.is_set():
        return None
    _compiled.set()

    def run() -> None:
        import compileall

        import oncelog

        with contextlib.suppress(OSError, ValueError):
            compileall.compile_dir(os.path.dirname(oncelog.__file__), quiet=2, workers=1)

    thread = threading.Thread(target=run, name="oncelog-compile", daemon=True)
    thread.start()
    if wait:
        thread.join()
    return thread


@contextlib.contextmanager
def _spark_home(home: str | None):
    """``SPARK_HOME`` set while the JVM is launched (PySpark reads it then; the JVM keeps its own
    copy), and restored after: this process's other children, another PySpark's driver among
    them, must not inherit it."""
    if home is None:
        yield
        return
    os.environ["SPARK_HOME"] = home
    try:
        yield
    finally:
        os.environ.pop("SPARK_HOME", None)
