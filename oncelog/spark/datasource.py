"""``format("oncelog")``: the PySpark Python data source (source and sink, streaming and batch).

Thin by design: options are validated into frozen objects (:mod:`.options`), offsets are
computed by pure functions (:mod:`.offsets`), reading and writing live in :mod:`.source` and
:mod:`.sink`, and the exactly-once commit in :mod:`.commit`. Every object Spark pickles
(readers, writers, input partitions, commit messages) holds only options and plain values:
clients are created lazily in the process that uses them.

Example::

    from oncelog.spark import OncelogDataSource
    spark.dataSource.register(OncelogDataSource)
    df = (spark.readStream.format("oncelog")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders").option("startingOffsets", "earliest").load())
    (df.selectExpr("key", "upper(cast(value as string)) as value").writeStream.format("oncelog")
       .option("kafka.bootstrap.servers", "127.0.0.1:9092").option("topic", "orders-upper")
       .option("checkpointLocation", "/data/ckpt").start())
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from dataclasses import dataclass

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from . import offsets as off
from .options import OptionError, SinkOptions, SourceOptions, sink_options, source_options
from .workerpython import check_driver_session
from .source import SCHEMA, SCHEMA_WITH_HEADERS, OffsetPlanner, handle_data_loss, read_range
from .barrier import in_commit_runner
from .sink import (check_schema, driver_abort, driver_commit, driver_open_barrier, driver_prepare_partition_markers,
                   driver_recover, run_write_task)

log = logging.getLogger("oncelog.spark")


@dataclass(frozen=True)
class OffsetRangePartition(InputPartition):
    """One read task: a partition's range [start, end)."""

    topic: str
    partition: int
    start: int
    end: int

    def as_range(self) -> off.OffsetRange:
        return off.OffsetRange(self.topic, self.partition, self.start, self.end)


def _input_partitions(opts: SourceOptions, ranges: list[off.OffsetRange]) -> list[OffsetRangePartition]:
    """One read task per range, large ranges split by minPartitions / maxRecordsPerPartition."""
    ranges = off.split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)
    return [OffsetRangePartition(r.topic, r.partition, r.start, r.end) for r in ranges]


def _read(opts: SourceOptions, partition):
    # PySpark gives a batch read that planned no partition one bare InputPartition(None)
    # (plan_data_source_read.py): an empty range has no rows.
    if not isinstance(partition, OffsetRangePartition):
        return iter(())
    return read_range(opts, partition.as_range())


class RefusedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming query whose options are wrong for streaming (e.g. endingOffsets). Raising in
    ``streamReader()`` would bury the message under PySpark's own UnboundLocalError (its runner's
    ``finally: reader.stop()``), so the reader is made and refuses on the first call instead."""

    def __init__(self, message: str) -> None:
        self.message = message

    def _refuse(self):
        raise OptionError(self.message)

    def initialOffset(self) -> dict:
        self._refuse()

    def latestOffset(self, start: dict, limit) -> dict:
        self._refuse()

    def getDefaultReadLimit(self):
        self._refuse()

    def prepareForTriggerAvailableNow(self) -> None:
        self._refuse()

    def partitions(self, start: dict, end: dict):
        self._refuse()

    def read(self, partition):
        self._refuse()


class OncelogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader with admission control (``latestOffset(start, limit)``)."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._planner: OffsetPlanner | None = None
        self._target: off.Offsets | None = None  # Trigger.AvailableNow: read up to here, then stop
        self._latest: off.Offsets | None = None
        self._last_batch = time.monotonic()

    @property
    def planner(self) -> OffsetPlanner:
        if self._planner is None:
            self._planner = OffsetPlanner(self.opts)
        return self._planner

    def initialOffset(self) -> dict:
        tps = self.planner.partitions()
        if self.opts.starting.kind == "latest":
            # "latest" is a moment, not a position: Spark does not checkpoint a source's start,
            # and calls initialOffset() again when a restart replays batch 0. So the start is
            # LATEST (-1) and the first latestOffset() turns it into positions, which Spark
            # does checkpoint as batch 0's end; batch 0 itself reads nothing.
            return off.canonical({tp: off.LATEST for tp in tps})
        return off.canonical(self.planner.resolve(self.opts.starting, tps, default_kind="latest"))

    def getDefaultReadLimit(self):
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.planner.available(self.planner.partitions())

    def latestOffset(self, start: dict, limit) -> dict:
        start_o = off.from_json(start)
        tps = self.planner.partitions()
        current = set(tps)
        for tp in sorted(set(start_o) - current):
            handle_data_loss(self.opts, f"{tp[0]}-{tp[1]} is gone (topic or partition deleted); offsets from "
                                        f"{start_o[tp]} on can no longer be read")
            del start_o[tp]
        available = self.planner.available(tps)
        if self._target is not None:
            available = {tp: min(e, self._target.get(tp, e)) for tp, e in available.items()}
        unresolved = {tp for tp, o in start_o.items() if o == off.LATEST}
        if unresolved:  # the first batch of a query started at "latest": fix its positions
            return off.canonical({**start_o, **{tp: available[tp] for tp in unresolved if tp in available}})
        for tp, end in list(available.items()):
            if tp in start_o and end < start_o[tp]:
                handle_data_loss(self.opts, f"{tp[0]}-{tp[1]}: the log now ends at {end}, before the query's position "
                                            f"{start_o[tp]} (the topic was recreated or truncated)")
                available[tp] = start_o[tp]
        if self._target is not None:
            available = {tp: min(e, self._target.get(tp, start_o.get(tp, 0))) for tp, e in available.items()}
        self._latest = dict(available)
        new_start = {tp: 0 for tp in tps if tp not in start_o}
        max_rows = getattr(limit, "max_rows", None)
        end = off.rate_limit(start_o, available, max_rows, new_start)
        min_rows = self.opts.min_offsets_per_trigger
        if min_rows is not None and self._target is None:
            waited_ms = (time.monotonic() - self._last_batch) * 1000
            # Spark's delayBatch: decide on everything available, not on the rate-limited end.
            if off.total_lag(start_o, available, new_start) < min_rows and waited_ms < self.opts.max_trigger_delay_ms:
                return off.canonical(start_o)
        result = {**start_o, **end}
        if result != start_o:
            self._last_batch = time.monotonic()
        return off.canonical(result)

    def reportLatestOffset(self):
        return off.canonical(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict):
        return _input_partitions(self.opts, off.ranges(off.from_json(start), off.from_json(end)))

    def read(self, partition: OffsetRangePartition):
        return _read(self.opts, partition)

    def commit(self, end: dict) -> None:
        # Progress lives in Spark's checkpoint; nothing to do here (called one batch late, and
        # not at all for the last batch before a stop).
        return None

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()


class OncelogBatchReader(DataSourceReader):
    """``spark.read.format("oncelog")``: startingOffsets (default earliest) to endingOffsets
    (default latest, i.e. the last stable offset at read_committed)."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self):
        planner = OffsetPlanner(self.opts)
        try:
            tps = planner.partitions()
            start = planner.resolve(self.opts.starting, tps, default_kind="earliest")
            end = planner.resolve(self.opts.ending, tps, default_kind="latest", starting=False)
        finally:
            planner.close()
        for tp in tps:
            if end[tp] < start[tp]:
                raise ValueError(f"{tp[0]}-{tp[1]}: endingOffsets {end[tp]} is before startingOffsets {start[tp]}")
        return _input_partitions(self.opts, off.ranges(start, end))

    def read(self, partition: OffsetRangePartition):
        return _read(self.opts, partition)


def _query_id_from_checkpoint(opts: SinkOptions) -> str | None:
    """The query id in ``<checkpointLocation>/metadata`` when the checkpoint is a local path."""
    loc = opts.checkpoint_location
    if not loc:
        return None
    path = loc[len("file:"):] if loc.startswith("file:") else loc
    if "://" in path:
        return None
    try:
        with open(os.path.join(path, "metadata")) as f:
            return json.loads(f.readline()).get("id")
    except (OSError, ValueError):
        return None


class OncelogStreamWriter(DataSourceStreamArrowWriter):
    """Exactly-once (or at-least-once) micro-batch sink; see :mod:`oncelog.spark.commit`
    (``atomicity=batch``) and :mod:`oncelog.spark.partition` (``atomicity=partition``)."""

    def __init__(self, opts: SinkOptions, barrier: tuple[str, int, int] | None = None) -> None:
        self.opts = opts
        self.prefix = opts.transactional_id_prefix
        self.barrier = barrier

    def write(self, iterator):
        return run_write_task(self.opts, iterator, prefix=self.prefix, run_id="", barrier=self.barrier)

    def commit(self, messages, batchId: int) -> None:
        driver_commit(self.opts, messages, batchId)

    def abort(self, messages, batchId: int) -> None:
        driver_abort(self.opts, messages, batchId)


class OncelogBatchWriter(DataSourceArrowWriter):
    """``df.write.format("oncelog")``. With ``txnAppId`` + ``txnVersion`` (e.g. from inside
    ``foreachBatch``: the query name and the batchId) the write is exactly-once: a version
    already committed is not written again. Without them use ``deliveryGuarantee=at-least-once``."""

    def __init__(self, opts: SinkOptions, barrier: tuple[str, int, int] | None = None) -> None:
        self.opts = opts
        self.run_id = uuid.uuid4().hex[:8]  # made once on the driver, shared by the tasks
        self.barrier = barrier

    def write(self, iterator):
        return run_write_task(self.opts, iterator, prefix=self.opts.transactional_id_prefix, run_id=self.run_id,
                              barrier=self.barrier)

    def commit(self, messages) -> None:
        driver_commit(self.opts, messages, self.opts.txn_version or 0)

    def abort(self, messages) -> None:
        driver_abort(self.opts, messages, self.opts.txn_version or 0)


def _clean(validate, options, **kwargs):
    """``validate(options)``, an OptionError raised from here: PySpark prints the traceback of
    a data source's error, and the user needs the message, not the validator's frames."""
    try:
        return validate(options, **kwargs)
    except OptionError as exc:
        error = OptionError(str(exc))
    raise error


class OncelogDataSource(DataSource):
    """Kafka-protocol source and sink with exactly-once semantics. Format name ``oncelog``."""

    @classmethod
    def name(cls) -> str:
        # spark.dataSource.register() calls this on the driver: the one place where a driver
        # can tell, before any worker starts, that the workers' Python lacks oncelog.
        check_driver_session()
        return "oncelog"

    def schema(self):
        # Called by load() (spark.read and spark.readStream alike, so the rules of one mode
        # wait for reader()/streamReader()): option errors surface at load(), as with Spark's
        # Kafka source, and not at start() or the first action.
        opts = _clean(source_options, self.options, batch=None)
        return SCHEMA_WITH_HEADERS if opts.include_headers else SCHEMA

    def streamReader(self, schema):
        try:
            return OncelogStreamReader(source_options(self.options))
        except OptionError as exc:
            return RefusedStreamReader(str(exc))

    def reader(self, schema):
        return OncelogBatchReader(_clean(source_options, self.options, batch=True))

    def streamWriter(self, schema, overwrite: bool):
        opts = _clean(sink_options, self.options)
        check_schema(schema, opts)
        if overwrite:
            raise ValueError("oncelog does not support Complete output mode (a Kafka topic cannot be truncated); "
                             "use Append, or Update through foreachBatch with txnAppId/txnVersion")
        if opts.transactional_id_prefix is None:
            query_id = _query_id_from_checkpoint(opts)
            if query_id is not None:
                opts = _with_prefix(opts, f"oncelog-{query_id}")
        if opts.exactly_once and opts.atomicity == "partition":
            # The tasks' progress markers live on the commit-log topic: it must exist before
            # they commit. Nothing to recover: each task finishes (or fences) its own partition.
            driver_prepare_partition_markers(opts)
        elif opts.exactly_once and opts.transactional_id_prefix is not None:
            # On the driver, before this micro-batch's tasks: finish what a crashed run decided
            # (not a Spark contract, so commit() and abort() recover too).
            outcome = driver_recover(opts)
            if outcome and outcome.startswith("rolled"):
                log.warning("%s: %s", opts.transactional_id_prefix, outcome)
            if opts.topic is not None and opts.hook("barrier") != "false" and not in_commit_runner():
                # After the roll-forward (which a previous run's barrier still protects) and
                # before the tasks: see oncelog.spark.barrier.
                return OncelogStreamWriter(opts, driver_open_barrier(opts))
        return OncelogStreamWriter(opts)

    def writer(self, schema, overwrite: bool):
        if overwrite:
            # Spark's Kafka sink refuses Overwrite and Ignore (_LEGACY_ERROR_TEMP_3081); PySpark
            # itself refuses ErrorIfExists and Ignore for every Python data source.
            raise OptionError("Save mode Overwrite not allowed for oncelog (a Kafka topic cannot be truncated). "
                              "The allowed save mode is Append: df.write.format(\"oncelog\").mode(\"append\")")
        opts = _clean(sink_options, self.options, batch=True)
        check_schema(schema, opts)
        if opts.exactly_once and opts.topic is not None and opts.hook("barrier") != "false":
            # Spark calls writer() once, on the driver, before the tasks (the commit gets this
            # very object). Roll a crashed run's decision forward first: its barrier still
            # hides it, and opening ours fences that barrier.
            driver_recover(opts)
            return OncelogBatchWriter(opts, driver_open_barrier(opts))
        return OncelogBatchWriter(opts)


def _with_prefix(opts: SinkOptions, prefix: str) -> SinkOptions:
    from dataclasses import replace

    return replace(opts, transactional_id_prefix=prefix)
