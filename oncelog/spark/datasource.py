"""``format("oncelog")``: the DataSource, whose docstring is the option reference (:mod:`.options` checks them).

Each method imports only what its call needs. Spark runs the data source's steps in Python
processes of their own, started one after another on a (re)started query's way to its first
micro-batch: the lookup of ``pyspark_*`` sources, ``schema()``, the reader's and the writers'
factories, the tasks, the commits; every one of them imports this module. Its own imports are
light (the options, no Kafka client, no pyarrow): the source's and the sink's modules, with the
client, load in the processes that use them (BENCHMARKS.md, "Driver restart").
"""

from pyspark.sql.datasource import DataSource

from .options import source_schema
from .workerpython import check_driver_session


class OncelogDataSource(DataSource):
    """Kafka-protocol source and sink with exactly-once semantics, for oncelog or any Kafka cluster.

    Name: ``oncelog``

    Notes
    -----
    Names and meanings of Spark's Kafka connector, plus the sink's own; case-insensitive, checked at
    ``load()``/``start()``: an unknown option is refused, naming it. Rows have Spark's Kafka schema; the
    sink takes its sink's columns (``value``; ``key``, ``topic``, ``partition``, ``headers``).
    ``groupIdPrefix``, ``kafka.group.id`` are refused (no consumer group); ``df.write`` is append only.

    Parameters
    ----------
    kafka.bootstrap.servers : str, required
        The brokers, ``host:port[,host:port...]``.
    kafka.* : str, optional
        Kafka client settings under their Java names: ``kafka.security.protocol``, ``kafka.sasl.*``,
        ``kafka.ssl.*``, ``kafka.isolation.level`` (default **read_committed**), ``kafka.compression.type``
        (and ``.<codec>.level``), ``kafka.max.partition.fetch.bytes``, ``kafka.delivery.timeout.ms``.
        Checked as the Java client checks them (names, types, ranges of kafka-clients 4.4): an
        unknown name, a bad value, a Java class or (sink) ``acks`` other than ``all`` is refused;
        a valid setting the connector does not read is logged as ignored, with the reason.
    subscribe, subscribePattern, assign : str
        Source, exactly one: topics (comma list), a regex, or JSON ``{"t":[0,1]}``.
    startingOffsets : str, default "latest" (stream), "earliest" (batch)
        ``earliest``, ``latest`` or JSON ``{"t":{"0":23,"1":-2}}`` (-2 earliest, -1 latest).
    startingTimestamp, startingOffsetsByTimestamp : int or str (JSON), optional
        Start at the first record at or after a time (ms); the JSON form names every partition.
    startingOffsetsByTimestampStrategy : {"error", "latest"}, default "error"
        No record at or after the starting timestamp: fail the query, or start at the end.
    endingOffsets, endingTimestamp, endingOffsetsByTimestamp : str or int, default "latest"
        Batch reads (``spark.read``) only; forms as for the start.
    minPartitions, maxRecordsPerPartition : int, optional
        Split large ranges into about ``minPartitions`` read tasks, none over ``maxRecordsPerPartition``.
    maxOffsetsPerTrigger : int, optional
        Offsets per micro-batch, split across partitions by lag as Spark does.
    minOffsetsPerTrigger, maxTriggerDelay : int, duration; optional, default "15m"
        Wait for this many new offsets before a micro-batch, at most this long.
    failOnDataLoss : bool, default true
        Offsets gone under the reader fail the query naming them; ``false`` logs and skips.
    includeHeaders : bool, default false
        Add ``headers array<struct<key string, value binary>>``.
    fetchOffset.numRetries, fetchOffset.retryIntervalMs : int, default 3, 1000
        Attempts and spacing (ms) of the driver's offset look-ups.
    kafkaConsumer.pollTimeoutMs : int, default 120000
        A read task fails after this long without progress.
    topic : str, optional
        Sink: the target topic; overrides a ``topic`` column.
    deliveryGuarantee : {"exactly-once", "at-least-once"}, default "exactly-once"
        ``at-least-once``: plain produce, as Spark's own Kafka sink.
    atomicity : {"batch", "partition"}, default "batch"
        ``batch``: a micro-batch commits whole; ``partition``: each task commits its own (needs deterministic replay).
    transactionalIdPrefix : str, default "oncelog-<query id>"
        Names the query's transactions (tasks: ``<prefix>-g<0|1>-<task>-<attempt>``, a bounded pool); stable across restarts.
    transaction.timeout.ms : int, default 300000
        Must outlast a restart; checked against the broker's maximum at start.
    commitLogTopic : str, default "oncelog-spark-commits"
        Compacted topic of each query's commit decisions (and ``atomicity=partition`` markers); made when
        missing with 1 MiB segments, ``segment.ms`` 1 h and ``delete.retention.ms`` 1 h (its size stays ~flat).
    txnAppId, txnVersion : str, int; optional
        ``df.write`` inside ``foreachBatch``: a version already committed is not written again.

    Examples
    --------
    >>> spark.dataSource.register(OncelogDataSource)  # or: pip install oncelog in the workers
    >>> df = (spark.readStream.format("oncelog").option("kafka.bootstrap.servers", "127.0.0.1:9092")
    ...       .option("subscribe", "orders").option("startingOffsets", "earliest").load())
    >>> q = (df.writeStream.format("oncelog").option("kafka.bootstrap.servers", "127.0.0.1:9092")
    ...      .option("topic", "orders-copy").option("checkpointLocation", "/data/ckpt").start())
    """

    @classmethod
    def name(cls) -> str:
        # Called by spark.dataSource.register() on the driver: where to find out that the workers'
        # Python lacks oncelog, and to install what releases a stopped query's transactions.
        check_driver_session()
        from .release import install_on_active_session

        install_on_active_session()
        return "oncelog"

    def schema(self):
        return source_schema(self.options)

    def streamReader(self, schema):
        from .source import stream_reader

        return stream_reader(self.options)

    def reader(self, schema):
        from .source import batch_reader

        return batch_reader(self.options)

    def streamWriter(self, schema, overwrite: bool):
        from .sink import stream_writer

        return stream_writer(self.options, schema, overwrite)

    def writer(self, schema, overwrite: bool):
        from .sink import batch_writer

        return batch_writer(self.options, schema, overwrite)
