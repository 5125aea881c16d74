"""The source: a replayable read_committed Kafka reader for Spark's Python data source API.

Process model (see SPARK-NOTES): the stream reader lives in a long-lived driver-side runner
(``initialOffset``, ``latestOffset``, ``partitions``, ``commit``), is pickled into the read
UDF by a planner worker, and is unpickled afresh in every task (``read``). So nothing
unpicklable is created in ``__init__``: the driver's metadata client is created lazily, and
tasks take protocol clients from a module-level cache (Python workers are reused).

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

from ..client.kafka import EARLIEST, LATEST, KafkaClient, KafkaProtocolError
from ..client.recordcodec import HEADER_TYPE, decode_batches
from . import offsets as off
from .options import SourceOptions

log = logging.getLogger("oncelog.spark")

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
          "timestampType int")
SCHEMA_WITH_HEADERS = SCHEMA + ", headers array<struct<key: string, value: binary>>"


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


# Protocol clients of this Python worker, reused across tasks (workers are reused by Spark).
_CLIENTS: dict[tuple, KafkaClient] = {}


def cached_client(bootstrap: str, config: dict[str, str]) -> KafkaClient:
    key = (bootstrap, tuple(sorted(config.items())))
    client = _CLIENTS.get(key)
    if client is None:
        client = _CLIENTS[key] = KafkaClient(bootstrap, config)
    return client


def evict_client(bootstrap: str, config: dict[str, str]) -> None:
    """Forget (and close) this worker's cached client, e.g. after a network error: on a cluster
    it may hold connections to a broker that died and leaders that moved; the next
    :func:`cached_client` starts from the bootstrap servers again."""
    client = _CLIENTS.pop((bootstrap, tuple(sorted(config.items()))), None)
    if client is not None:
        client.close()


def handle_data_loss(opts: SourceOptions, message: str) -> None:
    if opts.fail_on_data_loss:
        raise DataLossError(message + ". Some data may have been lost because it is no longer available in "
                            "Kafka; set failOnDataLoss=false to skip it and go on.")
    log.warning("%s; failOnDataLoss=false, skipping it", message)


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


@dataclass(frozen=True)
class RangePartition:
    """What a read task needs (pickled into the task): the range, and the source options."""

    range: off.OffsetRange

    # Spark checks only that it is an InputPartition; the base class has no required state.


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
            pa.array(np.full(n, r.partition, dtype=np.int32)),
            pa.array(decoded.offsets),
            pa.array(decoded.timestamps_ms * 1000, pa.timestamp("us", tz="UTC")),
            pa.array(decoded.timestamp_types),
        ]
        if opts.include_headers:
            columns.append(decoded.headers)
        yield pa.RecordBatch.from_arrays(columns, schema=schema)
