"""The Spark connector: ``format("oncelog")``, a replayable read_committed source and an
exactly-once, batch-atomic sink for PySpark's Python data source API. Works against oncelog
and any Kafka-protocol cluster (it uses only the public protocol, through ``oncelog.client``).

    from oncelog.spark import OncelogDataSource
    spark.dataSource.register(OncelogDataSource)

Modules, from Spark's entry point down:
    datasource        OncelogDataSource: its docstring is the option reference; one line per method
    options           the options, validated into frozen objects before any I/O
    source, offsets   the readers, the driver's OffsetPlanner, read_range; offset arithmetic (pure)
    sink              the writers and their factories: each holds a SinkMode
    modes             AtLeastOnce | BatchAtomic | PartitionAtomic: prepare, write, commit, abort
    writer            a write task: TaskWriter (Arrow to record batches), the commit message
    batch_commit      atomicity=batch: the driver's two-phase commit over Kafka transactions
    txn_pool          atomicity=batch: the write tasks' transactional ids, a bounded pool (pure)
    barrier           atomicity=batch: the visibility barrier (a batch appears all at once)
    release           what stopping (query.stop(), spark.stop(), exit) releases: a registry, hooks
    partition_commit  atomicity=partition: a task's transaction with its progress marker
    faults            every test hook: the only reader of the test variables and options
    session, workerpython  a local SparkSession; the check of the workers' interpreter
"""

from .datasource import OncelogDataSource

__all__ = ["OncelogDataSource"]
