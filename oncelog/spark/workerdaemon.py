"""Spark's Python worker daemon for the connector's sessions: ``pyspark.daemon`` with what every
task worker imports already imported, once, before it forks the workers.

Spark starts one daemon per worker kind and forks a process from it for each Python worker; the
forked worker imports its module (``pyspark.worker``) and then, unpickling its task, the
connector's reader or writer with pyarrow, NumPy and the Kafka client: 0.3-0.4 s of CPU in every
task worker, four of them on the way to a restarted query's first micro-batch (``local[2]``: two
tasks at a time, each a reader and a writer). Imported here, in the daemon, they come with the
fork for free. ``pyspark.daemon`` imports the worker module after the fork because "pandas and
pyarrow start some threads when they are imported": pyarrow starts jemalloc's background thread
and NumPy OpenBLAS's, and both register fork handlers (jemalloc's prefork/postfork, OpenBLAS's
thread shutdown), which is what makes forking after importing them safe, as Python's
``multiprocessing`` does daily. pandas is imported too: the connector does not use it, but
PySpark's write path does (``write_into_data_source``'s write function imports it in every
writer worker: ~0.5 s of CPU each, 2.2 s of a restart's first micro-batch in a py-spy profile of
``bench restart``); it starts no thread of its own (NumPy's are there already).

Used through ``spark.python.daemon.module`` (:func:`oncelog.spark.session.local_session`, only
when the workers run this interpreter). Only task workers go through it: Spark starts its
planner processes (data source lookup, ``plan_data_source_read``, the streaming runners) with
``pyspark.daemon`` whatever the setting says.
"""

from __future__ import annotations


def preload() -> None:
    """Import what a task worker of the connector imports; a module that fails to import is left
    to the worker, which reports it as it always did."""
    import importlib

    for name in ("pyspark.worker", "oncelog.spark.source", "oncelog.spark.sink", "pandas"):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the forked worker imports it again and fails visibly
            pass


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager

    # pyspark.daemon's worker() imports sys.argv[1] (the worker module, pyspark.worker) after each
    # fork: in sys.modules already.
    manager()
