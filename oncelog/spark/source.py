"""The source: a replayable read_committed Kafka reader for Spark's Python data source API.

Process model (see SPARK-NOTES): the stream reader lives in a long-lived driver-side runner
(``initialOffset``, ``latestOffset``, ``partitions``, ``commit``), is pickled into the read
UDF by a planner worker, and is unpickled afresh in every task (``read``). So nothing
unpicklable is created in ``__init__``: the driver's metadata client is created lazily, and
tasks take protocol clients from a process-wide cache (``oncelog.client.kafka.cached_client``;
Python workers are reused).

In this module, top down: the readers Spark calls (:class:`OncelogStreamReader` with
``latestOffset``'s admission rule, :class:`OncelogBatchReader`), the driver's
:class:`OffsetPlanner` (partitions and offsets, retried), and :func:`read_range`, a read task.

Reading a range ``[start, end)`` of one partition: Fetch at the configured isolation level
(read_committed by default) until the position reaches ``end``. Markers and aborted records
use offsets but yield no rows, so the loop ends on the position, never on a row count: a
partition holding only aborted records still finishes. Rows leave as pyarrow RecordBatches in
exactly the schema of Spark's Kafka source.

A batch never ends past a partition's last stable offset (ListOffsets LATEST at read_committed),
so a replay of the same (start, end) re-reads committed, immutable data and yields the same rows.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from kio.schema.errors import ErrorCode
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from ..client.kafka import EARLIEST, LATEST, KafkaClient, KafkaProtocolError, cached_client
from ..client.recordcodec import HEADER_TYPE, column, decode_batches

from . import offsets as off
from .options import OptionError, SourceOptions, clean, source_options

log = logging.getLogger("oncelog.spark")



class DataLossError(RuntimeError):
    """Offsets the query should have read are gone (retention, DeleteRecords, deleted topic)."""


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [
        pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")), pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADER_TYPE))
    return pa.schema(fields)


def handle_data_loss(opts: SourceOptions, message: str) -> None:
    if opts.fail_on_data_loss:
        raise DataLossError(message + ". Some data may have been lost because it is no longer available in "
                            "Kafka; set failOnDataLoss=false to skip it and go on.")
    log.warning("%s; failOnDataLoss=false, skipping it", message)


# ---------------------------------------------------------------------------------------------
# Spark's side: the readers


def stream_reader(options) -> DataSourceStreamReader:
    """``DataSource.streamReader()``."""
    try:
        return OncelogStreamReader(source_options(options))
    except OptionError as exc:
        return RefusedStreamReader(str(exc))


def batch_reader(options) -> DataSourceReader:
    """``DataSource.reader()``."""
    return OncelogBatchReader(clean(source_options, options, batch=True))


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


# ---------------------------------------------------------------------------------------------
# Driver side: topics, partitions and offsets


class OffsetPlanner:
    """The driver's view of the subscribed partitions and their offsets (one per runner).

    Every look-up (Metadata, ListOffsets) is tried ``fetchOffset.numRetries`` times,
    ``fetchOffset.retryIntervalMs`` apart, on a fresh client each time, as Spark's
    KafkaOffsetReaderAdmin.withRetries does: a broker restarting while a batch is planned
    costs a retry, not the query."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._client: KafkaClient | None = None
        # Offsets a spec resolved to, per (spec, default kind) and partition: see resolve().
        self._resolved: dict[tuple[str, str], off.Offsets] = {}

    @property
    def client(self) -> KafkaClient:
        if self._client is None:
            self._client = KafkaClient(self.opts.bootstrap, self.opts.kafka)
        return self._client

    def _retrying(self, what: str, call):
        opts = self.opts
        attempt = 1
        while True:
            try:
                return call(self.client)
            except (OSError, KafkaProtocolError) as exc:
                if attempt >= opts.fetch_offset_num_retries:
                    raise
                log.warning("%s failed (attempt %d of %d, fetchOffset.numRetries), retrying in %d ms: %s", what,
                            attempt, opts.fetch_offset_num_retries, opts.fetch_offset_retry_interval_ms, exc)
                attempt += 1
                time.sleep(opts.fetch_offset_retry_interval_ms / 1000)
                self.close()  # a fresh client, as Spark resets its admin

    def _metadata(self, topics):
        return self._retrying("Metadata", lambda c: c.metadata(topics))

    def _list_offsets(self, specs) -> dict:
        return self._retrying("ListOffsets", lambda c: c.list_offsets(specs, self.opts.isolation_level))

    def partitions(self) -> list[tuple[str, int]]:
        """The subscribed partitions that exist now, sorted."""
        opts = self.opts
        if opts.assign is not None:
            meta = self._metadata(sorted(opts.assign))
            out = []
            for topic, parts in opts.assign.items():
                known = meta.get(topic)
                for p in parts:
                    if known is None or p not in known.partitions:
                        raise ValueError(f"assigned partition {topic}-{p} does not exist")
                    out.append((topic, p))
            return sorted(out)
        meta = self._metadata(list(opts.subscribe) if opts.subscribe else None)
        out = []
        for topic, tm in meta.items():
            if tm.error.value != 0 or not opts.matches(topic) or topic.startswith("__"):
                continue
            out += [(topic, p) for p in tm.partitions]
        return sorted(out)

    def list(self, tps, spec: int) -> off.Offsets:
        if not tps:
            return {}
        res = self._list_offsets({tp: spec for tp in tps})
        return {tp: o for tp, (o, _ts) in res.items()}

    def available(self, tps) -> off.Offsets:
        """Latest readable offsets: the last stable offset at read_committed."""
        return self.list(tps, LATEST)

    def resolve(self, spec, tps, *, default_kind: str, starting: bool = True) -> off.Offsets:
        """Turn a startingOffsets/endingOffsets spec into concrete offsets for ``tps``.

        A partition is resolved once per planner: asking again gives the same offset. Spark
        calls ``initialOffset`` twice when a query starts, once to plan the first batch's end
        and again for its start; with ``latest`` a second lookup lands past records that
        arrived in between, and the first batch would skip them (its start after its end).
        Spark's Kafka source stores its initial offsets in the checkpoint for the same reason."""
        if spec.kind == "json":
            subscribed = set(tps)
            for topic, parts in spec.per_partition.items():
                for p in parts:
                    if (topic, int(p)) not in subscribed:
                        raise ValueError(f"offsets given for {topic}-{p}, which is not subscribed or does not exist")
        key = (repr(spec), default_kind, starting)
        known = self._resolved.setdefault(key, {})
        missing = [tp for tp in tps if tp not in known]
        if missing:
            known.update(self._resolve(spec, missing, default_kind=default_kind, starting=starting))
        return {tp: known[tp] for tp in tps}

    def _resolve(self, spec, tps, *, default_kind: str, starting: bool) -> off.Offsets:
        kind = spec.kind
        if kind == "earliest":
            return self.list(tps, EARLIEST)
        if kind == "latest":
            return self.available(tps)
        if kind == "json":
            out = {}
            earliest = latest = None
            for tp in tps:
                given = spec.per_partition.get(tp[0], {}).get(str(tp[1]))
                if given is None:
                    given = -2 if default_kind == "earliest" else -1
                if given == -2:
                    earliest = earliest or self.list(tps, EARLIEST)
                    out[tp] = earliest[tp]
                elif given == -1:
                    latest = latest or self.available(tps)
                    out[tp] = latest[tp]
                else:
                    out[tp] = given
            return out
        # timestamp: the first offset whose timestamp is at least the given one (ListOffsets)
        edge = "starting" if starting else "ending"
        by_ts: dict[tuple[str, int], int] = {}
        for tp in tps:
            ts = spec.timestamp if spec.timestamp is not None else spec.per_partition.get(tp[0], {}).get(str(tp[1]))
            if ts is None:
                raise ValueError(f"{edge}OffsetsByTimestamp gives no timestamp for {tp[0]}-{tp[1]} (as Spark's Kafka "
                                 "source, it must name every subscribed partition)")
            by_ts[tp] = ts
        res = self._list_offsets(by_ts) if by_ts else {}
        out = {}
        latest = None
        for tp, (o, _ts) in sorted(res.items()):
            if o < 0:
                # No record at or after the timestamp. An end is then the end of the log; a
                # start follows startingOffsetsByTimestampStrategy (Spark's readTimestampOffsets).
                if starting and self.opts.starting_timestamp_strategy == "error":
                    raise ValueError(f"No offset matched from request of topic-partition {tp[0]}-{tp[1]} and "
                                     f"timestamp {by_ts[tp]} (no record at or after it; set "
                                     "startingOffsetsByTimestampStrategy=latest to start at the end of the "
                                     "partition instead)")
                latest = latest or self.available(tps)
                o = latest[tp]
            out[tp] = o
        return out

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


# ---------------------------------------------------------------------------------------------
# Executor side: read one range


_HW_GRACE_S = 3.0


def _gone(client: KafkaClient, tp: tuple[str, int]) -> bool:
    """Whether fresh metadata lacks the partition (its topic or the partition was deleted)."""
    meta = client.metadata([tp[0]]).get(tp[0])
    return meta is None or meta.error != ErrorCode.none or tp[1] not in meta.partitions


def read_range(opts: SourceOptions, r: off.OffsetRange):
    """Yield RecordBatches of the committed records of ``r``, stopping when the fetch position
    reaches ``r.end``."""
    client = cached_client(opts.bootstrap, opts.kafka)
    tp = (r.topic, r.partition)
    position = r.start
    schema = arrow_schema(opts.include_headers)
    topic_bytes = r.topic.encode()
    poll_deadline = time.monotonic() + opts.poll_timeout_ms / 1000
    below_since: float | None = None  # since when the log has ended before the planned end
    while position < r.end:
        try:
            fetched = client.fetch({tp: position}, isolation_level=opts.isolation_level, max_wait_ms=500,
                                   partition_max_bytes=opts.partition_max_bytes)
        except KafkaProtocolError as exc:
            if exc.code == ErrorCode.broker_not_available and time.monotonic() <= poll_deadline:
                # The cached leader is a broker that has left the cluster's metadata (SIGKILLed):
                # ask again who leads the partition now.
                client.forget_leaders()
                time.sleep(0.2)
                continue
            # leader(): the metadata no longer has the partition (deleted topic or partition)
            if exc.code != ErrorCode.unknown_topic_or_partition or not _gone(client, tp):
                raise
            handle_data_loss(opts, f"{r.topic}-{r.partition}: offsets {position} to {r.end - 1} are gone "
                                   "(the topic or partition was deleted)")
            return
        except (OSError, ConnectionError) as exc:
            if time.monotonic() > poll_deadline:
                raise TimeoutError(f"{r.topic}-{r.partition}: no progress reading offset {position} "
                                   f"for {opts.poll_timeout_ms} ms: {exc}") from exc
            # The leader's broker is gone (a restart, or on a cluster a failover): ask again
            # who leads the partition, through whichever broker still answers.
            client.forget_leaders()
            time.sleep(0.2)
            continue
        pf = fetched.get(tp)
        if pf is None:
            raise ConnectionError(f"Fetch for {r.topic}-{r.partition} was answered without that partition")
        code = pf.error.value
        if code == 1:  # OFFSET_OUT_OF_RANGE: the data at position is gone (or not there yet)
            earliest = client.list_offsets({tp: EARLIEST}, opts.isolation_level)[tp][0]
            if position < earliest:
                handle_data_loss(opts, f"{r.topic}-{r.partition}: offsets {position} to {min(earliest, r.end) - 1} "
                                       f"are gone (the log now starts at {earliest})"
                                       + (" (a partition added after the query started)" if r.start == 0 and position == 0 else ""))
                position = min(earliest, r.end)
                continue
            handle_data_loss(opts, f"{r.topic}-{r.partition}: offsets {position} to {r.end - 1} are gone (offset "
                                   f"{position} is past the end of the log, which starts at {earliest}: the log was "
                                   "truncated or the topic recreated under the reader)")
            return
        if code == int(ErrorCode.unknown_topic_or_partition) and _gone(client, tp):
            handle_data_loss(opts, f"{r.topic}-{r.partition}: offsets {position} to {r.end - 1} are gone "
                                   "(the topic or partition was deleted)")
            return
        if code != 0:
            if time.monotonic() > poll_deadline:
                raise KafkaProtocolError(pf.error, f"Fetch {r.topic}-{r.partition} at offset {position}")
            time.sleep(0.1)
            continue
        aborted = pf.aborted if opts.isolation_level == 1 else None
        decoded = decode_batches(pf.records, start_offset=position, end_offset=r.end, aborted=aborted,
                                 include_headers=opts.include_headers)
        if decoded.next_offset <= position:
            # Nothing readable at this position yet (e.g. the LSO moved back after a broker
            # restart): wait, bounded by the poll timeout.
            if pf.log_start_offset > position:
                continue  # the OFFSET_OUT_OF_RANGE path will see it
            if 0 <= pf.high_watermark <= position:
                # The batch was planned up to r.end <= the high watermark then; the high
                # watermark moves back only when the log lost records (topic recreated,
                # truncated), or for a moment after a leader change in a cluster: give it a
                # few seconds, then what was planned is not coming back; do not wait for it.
                below_since = below_since or time.monotonic()
                if time.monotonic() - below_since >= _HW_GRACE_S:
                    handle_data_loss(opts, f"{r.topic}-{r.partition}: offsets {position} to {r.end - 1} are gone "
                                           f"(the log now ends at {pf.high_watermark}: the topic was recreated or "
                                           "truncated under the reader)")
                    return
                time.sleep(0.1)
                continue
            below_since = None
            if time.monotonic() > poll_deadline:
                raise TimeoutError(f"{r.topic}-{r.partition}: no progress at offset {position} for "
                                   f"{opts.poll_timeout_ms} ms (high watermark {pf.high_watermark}, last stable "
                                   f"offset {pf.last_stable_offset}, planned end {r.end})")
            continue
        poll_deadline = time.monotonic() + opts.poll_timeout_ms / 1000
        position = decoded.next_offset
        n = len(decoded)
        if n == 0:
            continue
        topic_col = pa.Array.from_buffers(
            pa.string(), n, [None, pa.py_buffer(np.arange(0, (n + 1) * len(topic_bytes), len(topic_bytes), dtype=np.int32)),
                             pa.py_buffer(topic_bytes * n)])
        columns = [
            decoded.keys, decoded.values, topic_col,
            column(np.full(n, r.partition, dtype=np.int32)),
            column(decoded.offsets),
            column(decoded.timestamps_ms * 1000, pa.timestamp("us", tz="UTC")),
            column(decoded.timestamp_types),
        ]
        if opts.include_headers:
            columns.append(decoded.headers)
        yield pa.RecordBatch.from_arrays(columns, schema=schema)
