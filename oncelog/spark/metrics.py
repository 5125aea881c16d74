"""Streaming queries' metrics in Prometheus's format, served by the driver: :func:`serve_query_metrics`.

    from oncelog.spark.metrics import serve_query_metrics
    m = serve_query_metrics(spark, bootstrap="127.0.0.1:9092")   # port=0: a free port
    print(m.url)                                                  # http://127.0.0.1:PORT/metrics
    ...
    m.close()

Where each figure comes from (docs/spark-metrics.md has the table of names):

* **Spark's progress events**, through a ``StreamingQueryListener`` registered on the session
  (``spark.streams.addListener``; the JVM posts the events, py4j's callback server hands them
  to this process): micro-batches, input rows per query and per source, the durations Spark
  measures (``triggerExecution``, ``addBatch``, ...), each source's start, end and latest
  offsets. The listener only copies numbers into plain state under a lock: no I/O in it.
* **The cluster, through** :mod:`oncelog.client` (the public protocol; any Kafka cluster), from
  one background thread, at most every ``poll_interval`` seconds (transactions every
  ``txn_interval``), never per record:
  - the sink's **commit log** (``commitLogTopic``, a compacted topic keyed by the query's
    transactional-id prefix, :mod:`.batch_commit`): each batch's decision (PENDING, the commit
    point) and its DONE record (every transaction complete), with the records the batch wrote
    and the Spark run that decided it. The sink's ``commit()`` runs in Spark's commit-runner
    process, not here (SPARK-NOTES §2): its log is the truthful trace of what it committed.
    Output records count DONE decisions; the commit latency is DONE minus PENDING, both
    stamped by the commit runner's clock; a progress event whose batch was decided by an
    *earlier run* is a re-executed batch the sink recognised and wrote nothing for;
  - **open transactions** of each query: ListTransactions (Ongoing), matched against the
    query's prefix as :mod:`.txn_pool` and :mod:`.barrier` name them;
  - each source partition's **last stable offset** (ListOffsets at read_committed): the lag
    behind the input, in offsets;
  - the **freshness** of the newest batch with input at each poll: the batch's end (progress
    timestamp plus ``triggerExecution``) minus the newest record timestamp at the end of each
    partition range it read, from the record batch headers' ``max_timestamp`` (one Fetch of all
    the partitions it read, at read_committed; no record is decoded).

Bounded: series are per query (name and id), per source, per input partition, and per phase of
Spark's fixed ``durationMs``; a query's series go ``forget_after`` seconds after it terminated.
"""

from __future__ import annotations

import bisect
import json
import logging
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime

log = logging.getLogger("oncelog.spark.metrics")

BATCH_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
COMMIT_BUCKETS_S = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
FRESHNESS_BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0)

DEFAULT_COMMIT_LOG = "oncelog-spark-commits"
MAX_BATCHES_PER_PREFIX = 64  # decisions remembered per transactional-id prefix
MAX_PREFIXES = 10_000  # prefixes of other queries sharing the commit log, remembered for their latest decision
MAX_PENDING = 128  # progress events per query waiting for the poller (the oldest dropped)
FRESHNESS_FETCH_BYTES = 256 * 1024  # partition_max_bytes of the freshness Fetch (headers are what it reads)


class _Hist:
    """Bucket counts, sum and count of one histogram series (seconds)."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def buckets(self) -> list[tuple[str, int]]:
        out, acc = [], 0
        for bound, n in zip(self.bounds, self.counts):
            acc += n
            out.append((repr(float(bound)), acc))
        out.append(("+Inf", acc + self.counts[-1]))
        return out


@dataclass
class _Source:
    description: str
    rows: int = 0
    end: dict[tuple[str, int], int] = field(default_factory=dict)  # after the latest batch
    latest: dict[tuple[str, int], int] = field(default_factory=dict)  # as the source reported it
    lso: dict[tuple[str, int], int] = field(default_factory=dict)  # probed by the poller


@dataclass
class _Pending:
    """A progress event waiting for the poller: its sink outcome and its freshness."""

    batch_id: int
    run8: str
    input_rows: int
    end_s: float  # wall time the batch ended
    ranges: list[tuple[str, int, int, int]]  # (topic, partition, start, end) it read
    outcome_done: bool = False
    fresh_done: bool = False
    seen_at: float = field(default_factory=time.monotonic)


@dataclass
class _Query:
    id: str
    name: str
    run_id: str = ""
    prefix: str = ""
    explicit_prefix: bool = False
    oncelog_sink: bool = False
    sink: str = ""
    runs: int = 0
    active: bool = True
    terminated_at: float | None = None  # monotonic
    batches: int = 0
    empty_batches: int = 0
    input_rows: int = 0
    sink_rows: int | None = None  # Spark's sink.numOutputRows summed (None: Spark reports none, -1)
    last_batch_id: int = -1
    last_progress_s: float = 0.0
    sources: dict[int, _Source] = field(default_factory=dict)
    last_durations: dict[str, float] = field(default_factory=dict)
    batch_hist: _Hist = field(default_factory=lambda: _Hist(BATCH_BUCKETS_S))
    add_batch_hist: _Hist = field(default_factory=lambda: _Hist(BATCH_BUCKETS_S))
    # the sink's figures, from its commit log
    outcomes: dict[str, int] = field(default_factory=dict)
    output_records: int = 0
    committed_batches: int = 0
    commit_hist: _Hist = field(default_factory=lambda: _Hist(COMMIT_BUCKETS_S))
    fresh_hist: _Hist = field(default_factory=lambda: _Hist(FRESHNESS_BUCKETS_S))
    last_freshness: float | None = None
    open_txns: dict[str, int] | None = None
    oldest_open_s: float | None = None
    pending: list[_Pending] = field(default_factory=list)


@dataclass
class _Decision:
    batch_id: int
    run_id: str
    records: int
    pending_ms: int | None = None  # the PENDING record's timestamp (the commit point)
    done_ms: int | None = None
    done_offset: int = -1
    counted: bool = False


def _parse_offsets(text) -> dict[tuple[str, int], int] | None:
    """``{"topic": {"0": 12}}`` (oncelog's and Spark's Kafka source's shape), else None."""
    if not text or text in ("None", "null"):
        return None
    try:
        raw = json.loads(text) if isinstance(text, str) else text
        return {(t, int(p)): int(o) for t, parts in raw.items() for p, o in parts.items()}
    except (ValueError, TypeError, AttributeError):
        return None


def _describe(description) -> str:
    """Spark's description of a source or sink without its object hash (``PythonTable@43998dc8``
    names a new object every run: as a label it would make a new series per run)."""
    return re.sub(r"@[0-9a-f]+$", "", str(description or ""))[:200]


def _epoch_s(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _terminated_outcome(exception: str | None) -> str:
    if not exception:
        return "stopped"
    if "StaleRunError" in exception:
        return "fenced"
    if "BatchLostError" in exception:
        return "batch-lost"
    return "failed"


class QueryMetrics:
    """The state behind the endpoint: fed by the listener, the poller and read by scrapes."""

    def __init__(self, *, bootstrap: str | None, kafka: dict[str, str] | None, commit_log_topic: str,
                 prefixes: dict[str, str] | None, poll_interval: float, txn_interval: float,
                 forget_after: float) -> None:
        self.bootstrap = bootstrap
        self.kafka = {k[len("kafka."):] if k.startswith("kafka.") else k: str(v) for k, v in (kafka or {}).items()}
        self.commit_log_topic = commit_log_topic
        self.prefixes = dict(prefixes or {})
        self.poll_interval = poll_interval
        self.txn_interval = txn_interval
        self.forget_after = forget_after
        self.lock = threading.Lock()
        self.queries: dict[str, _Query] = {}
        self.terminations: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.decisions: OrderedDict[str, OrderedDict[int, _Decision]] = OrderedDict()
        self.log_position: int | None = None  # next offset of the commit log to read
        self.watch_from: int | None = None  # DONE records from here on count as output
        self.last_txn_poll = 0.0
        self.log_read_at = 0.0  # monotonic start of the latest complete read of the commit log
        self.wake = threading.Event()
        self.closing = threading.Event()
        self._client = None
        self.poll_lock = threading.Lock()

    # -- the listener's side (py4j callback threads): copy numbers, no I/O ---------------------

    def started(self, qid: str, run_id: str, name: str | None) -> None:
        with self.lock:
            q = self.queries.get(qid)
            if q is None:
                q = self.queries[qid] = _Query(qid, name or "")
            q.name = name or q.name
            q.run_id, q.active, q.terminated_at = run_id, True, None
            q.runs += 1
            explicit = self.prefixes.get(q.name) or self.prefixes.get(qid)
            q.prefix, q.explicit_prefix = explicit or f"oncelog-{qid}", explicit is not None
            q.oncelog_sink = q.oncelog_sink or q.explicit_prefix
        self.wake.set()

    def progress(self, p) -> None:
        qid = str(p.id)
        ranges: list[tuple[str, int, int, int]] = []
        with self.lock:
            q = self.queries.get(qid)
            if q is None:  # registered after the query started
                self.queries[qid] = q = _Query(qid, p.name or "", run_id=str(p.runId), runs=1)
                explicit = self.prefixes.get(q.name) or self.prefixes.get(qid)
                q.prefix, q.explicit_prefix = explicit or f"oncelog-{qid}", explicit is not None
                q.oncelog_sink = q.explicit_prefix
            q.run_id = str(p.runId)
            rows = int(p.numInputRows or 0)
            q.batches += 1
            q.empty_batches += rows == 0
            q.input_rows += rows
            q.last_batch_id = int(p.batchId)
            durations = {k: float(v) / 1000 for k, v in (p.durationMs or {}).items()}
            q.last_durations = durations
            if "triggerExecution" in durations:
                q.batch_hist.observe(durations["triggerExecution"])
            if "addBatch" in durations:
                q.add_batch_hist.observe(durations["addBatch"])
            try:
                start_s = _epoch_s(p.timestamp)
            except (TypeError, ValueError):
                start_s = time.time() - durations.get("triggerExecution", 0.0)
            end_s = start_s + durations.get("triggerExecution", 0.0)
            q.last_progress_s = end_s
            for i, s in enumerate(p.sources or ()):
                src = q.sources.get(i)
                if src is None:
                    src = q.sources[i] = _Source(_describe(s.description))
                src.rows += int(s.numInputRows or 0)
                start, end = _parse_offsets(s.startOffset), _parse_offsets(s.endOffset)
                latest = _parse_offsets(s.latestOffset)
                if end is not None:
                    src.end = end
                    if int(s.numInputRows or 0) > 0:
                        ranges += [(t, part, (start or {}).get((t, part), 0), o) for (t, part), o in end.items()
                                   if o > (start or {}).get((t, part), 0) >= 0]
                if latest is not None:
                    src.latest = latest
            sink = getattr(p, "sink", None)
            q.sink = _describe(getattr(sink, "description", ""))
            sink_rows = getattr(sink, "numOutputRows", -1)
            if sink_rows is not None and sink_rows >= 0:
                q.sink_rows = (q.sink_rows or 0) + int(sink_rows)
            q.oncelog_sink = q.oncelog_sink or "oncelog" in q.sink.lower()
            q.pending.append(_Pending(int(p.batchId), str(p.runId)[:8], rows, end_s, ranges))
            del q.pending[:-MAX_PENDING]
        self.wake.set()

    def idle(self, qid: str, timestamp: str) -> None:
        with self.lock:
            q = self.queries.get(qid)
            if q is not None:
                try:
                    q.last_progress_s = max(q.last_progress_s, _epoch_s(timestamp))
                except (TypeError, ValueError):
                    pass

    def terminated(self, qid: str, exception: str | None) -> None:
        outcome = _terminated_outcome(exception)
        with self.lock:
            self.terminations[outcome] = self.terminations.get(outcome, 0) + 1
            q = self.queries.get(qid)
            if q is not None:
                q.active, q.terminated_at = False, time.monotonic()
        self.wake.set()

    def forget_expired(self) -> None:
        now = time.monotonic()
        with self.lock:
            for qid, q in list(self.queries.items()):
                if q.terminated_at is not None and now - q.terminated_at >= self.forget_after:
                    del self.queries[qid]

    # -- the poller's side (one thread): the cluster, through oncelog.client -------------------

    def _kafka_client(self):
        """The poller's client (``poll_lock`` held). No client is made once :meth:`close` began: a
        poll that starts after it (a late :meth:`QueryMetricsHandle.refresh`) would otherwise
        open a client that nothing closes."""
        if self.closing.is_set():
            raise _Closed("oncelog.spark.metrics is closed")
        if self._client is None:
            from ..client.kafka import KafkaClient

            self._client = KafkaClient(self.bootstrap, self.kafka, client_id="oncelog-spark-metrics")
        return self._client

    def _error(self, what: str, exc: BaseException) -> None:
        if self.closing.is_set():  # closed meanwhile: not the cluster's failure
            return
        with self.lock:
            self.errors[what] = self.errors.get(what, 0) + 1
        log.warning("oncelog.spark.metrics: %s failed: %s", what, exc)
        if self._client is not None:
            self._client.close()
            self._client = None

    def poll(self, *, transactions: bool | None = None) -> None:
        """One round: the commit log's new records, the outcomes and freshness of new batches,
        the input's last stable offsets, and (every ``txn_interval``, or when asked) the open
        transactions. Safe to call from any thread (:meth:`QueryMetricsHandle.refresh`)."""
        if self.bootstrap is None:
            self.forget_expired()
            return
        with self.poll_lock:
            if self.closing.is_set():
                return
            try:
                self._read_commit_log()
            except Exception as exc:  # noqa: BLE001 - a scrape must go on; counted
                self._error("commit-log", exc)
            try:
                self._resolve_pending()
            except Exception as exc:  # noqa: BLE001
                self._error("freshness", exc)
            try:
                self._probe_lag()
            except Exception as exc:  # noqa: BLE001
                self._error("lag", exc)
            due = time.monotonic() - self.last_txn_poll >= self.txn_interval
            if transactions or (transactions is None and due):
                self.last_txn_poll = time.monotonic()
                try:
                    self._open_transactions()
                except Exception as exc:  # noqa: BLE001
                    self._error("transactions", exc)
        self.forget_expired()

    def _read_commit_log(self) -> None:
        from ..client.kafka import EARLIEST, LATEST, READ_COMMITTED
        from ..client.recordcodec import decode_batches

        client = self._kafka_client()
        topic = self.commit_log_topic
        read_at = time.monotonic()
        meta = client.metadata([topic]).get(topic)
        if meta is None or meta.error.value != 0:
            if self.watch_from is None:
                self.watch_from = 0  # no log yet: whatever appears is this endpoint's to count
                self.log_position = 0
            self.log_read_at = read_at
            return
        tp = (topic, 0)
        end = client.list_offsets({tp: LATEST}, READ_COMMITTED)[tp][0]
        if self.watch_from is None:
            self.watch_from = end
            self.log_position = client.list_offsets({tp: EARLIEST}, READ_COMMITTED)[tp][0]
        if self.log_position > end:  # the topic was recreated
            self.log_position = 0
        while self.log_position < end:
            pf = client.fetch({tp: self.log_position}, isolation_level=READ_COMMITTED, max_wait_ms=0,
                              partition_max_bytes=1 << 20)[tp]
            if pf.error.value == 1:  # compacted or deleted below us
                self.log_position = client.list_offsets({tp: EARLIEST}, READ_COMMITTED)[tp][0]
                continue
            if pf.error.value != 0:
                raise RuntimeError(f"Fetch {topic}-0 at {self.log_position}: {pf.error.name}")
            decoded = decode_batches(pf.records, start_offset=self.log_position, end_offset=end,
                                     aborted=pf.aborted or [])
            keys, values = decoded.keys.to_pylist(), decoded.values.to_pylist()
            with self.lock:
                by_prefix: dict[str, list[_Query]] = {}
                for q in self.queries.values():
                    by_prefix.setdefault(q.prefix, []).append(q)
                for key, value, offset, ts in zip(keys, values, decoded.offsets.tolist(),
                                                  decoded.timestamps_ms.tolist()):
                    if key is not None and value is not None:
                        prefix = key.decode("utf-8", "replace")
                        done = self._decision(prefix, value, offset, ts)
                        # Counted now, as decoded: a long catch-up read holds more decisions of
                        # one prefix than are remembered, and the oldest would go uncounted.
                        for q in by_prefix.get(prefix, ()) if done is not None else ():
                            self._done(q, done)
            if decoded.next_offset <= self.log_position:
                break  # nothing decodable (a partial batch): the next poll tries again
            self.log_position = decoded.next_offset
        with self.lock:
            self.log_read_at = read_at
            for q in self.queries.values():  # decisions read before their query was known
                self._account(q)

    def _decision(self, prefix: str, value: bytes, offset: int, ts: int) -> _Decision | None:
        """One record of the commit log (lock held); the decision when this record is its
        DONE, else None."""
        try:
            d = json.loads(value)
            batch_id, state = int(d["batchId"]), d["state"]
        except (ValueError, KeyError, TypeError):
            return None  # not a decision (a partition marker of atomicity=partition, another shape)
        if not isinstance(state, str) or state not in ("pending", "done"):
            return None
        batches = self.decisions.get(prefix)
        if batches is None:
            batches = self.decisions[prefix] = OrderedDict()
            while len(self.decisions) > MAX_PREFIXES:
                self.decisions.popitem(last=False)
        self.decisions.move_to_end(prefix)
        seen = batches.get(batch_id)
        if seen is None:
            seen = batches[batch_id] = _Decision(batch_id, str(d.get("runId", "")), int(d.get("records", 0)))
            while len(batches) > MAX_BATCHES_PER_PREFIX:
                batches.popitem(last=False)
        if state == "pending" and seen.pending_ms is None:
            seen.pending_ms = ts
        elif state == "done" and seen.done_ms is None:
            seen.done_ms, seen.done_offset = ts, offset
            return seen
        return None

    def _count(self, q: _Query, d: _Decision) -> None:
        """Count a DONE decision once, when it appeared while the endpoint watched (lock held)."""
        if d.counted or d.done_ms is None or self.watch_from is None or d.done_offset < self.watch_from:
            return
        d.counted = True
        q.committed_batches += 1
        q.output_records += d.records
        if d.pending_ms is not None:
            q.commit_hist.observe(max(0, d.done_ms - d.pending_ms) / 1000)

    def _done(self, q: _Query, d: _Decision) -> None:
        """A DONE record of the query's prefix, as it is decoded (lock held): counted, and the
        outcome of the progress event of its batch, if one waits, settled."""
        q.oncelog_sink = True
        self._count(q, d)
        for item in q.pending:
            if item.batch_id == d.batch_id and not item.outcome_done:
                item.outcome_done = True
                outcome = "committed" if d.run_id == item.run8 else "already-committed"
                q.outcomes[outcome] = q.outcomes.get(outcome, 0) + 1

    def _account(self, q: _Query) -> None:
        """Count the query's remembered DONE decisions not counted yet (lock held): those read
        before a query of their prefix was known."""
        batches = self.decisions.get(q.prefix)
        if not batches:
            return
        q.oncelog_sink = True
        for d in batches.values():
            self._count(q, d)

    def _resolve_pending(self) -> None:
        from ..client.kafka import READ_COMMITTED

        with self.lock:
            work = [(q, list(q.pending)) for q in self.queries.values() if q.pending]
        for q, items in work:
            for item in items:
                if item.outcome_done or item.seen_at >= self.log_read_at:
                    continue  # resolved, or the log was last read before the batch was reported
                with self.lock:
                    batches = self.decisions.get(q.prefix) or {}
                    d = batches.get(item.batch_id)
                    if d is not None and d.done_ms is not None:
                        outcome = "committed" if d.run_id == item.run8 else "already-committed"
                    elif d is None and len(batches) >= MAX_BATCHES_PER_PREFIX and item.batch_id < min(batches):
                        outcome = "unknown"  # older than every decision remembered: its own may be forgotten
                    elif d is None and q.oncelog_sink:
                        # The sink wrote its decision before Spark posted the progress, and the
                        # log was read after the event arrived: no decision, no records.
                        outcome = "no-output"
                    elif time.monotonic() - item.seen_at > 60:
                        # PENDING for a minute (a commit stuck), or a sink that never wrote to
                        # this commit log (not oncelog's, or another commitLogTopic): not counted.
                        outcome = "unknown" if q.oncelog_sink else None
                    else:
                        continue  # PENDING only (its DONE comes), or not known yet to be oncelog's sink
                    item.outcome_done = True
                    if outcome is not None:
                        q.outcomes[outcome] = q.outcomes.get(outcome, 0) + 1
            # The newest batch with input only, with one Fetch: the ones before it are skipped.
            todo = [i for i in items if not i.fresh_done and i.ranges][-1:]
            for item in items:
                item.fresh_done = item.fresh_done or item not in todo
            for item in todo:
                newest = _newest_timestamp(self._kafka_client(), item.ranges, READ_COMMITTED)
                with self.lock:
                    item.fresh_done = True
                    if newest is not None:
                        q.last_freshness = max(0.0, item.end_s - newest / 1000)
                        q.fresh_hist.observe(q.last_freshness)
            with self.lock:
                q.pending = [i for i in q.pending if not (i.outcome_done and i.fresh_done)]

    def _probe_lag(self) -> None:
        from ..client.kafka import LATEST, READ_COMMITTED

        with self.lock:
            wanted = {tp for q in self.queries.values() if q.active for s in q.sources.values() for tp in s.end}
        if not wanted:
            return
        client = self._kafka_client()
        known = client.metadata(sorted({t for t, _ in wanted}))
        wanted = {tp for tp in wanted if tp[0] in known and known[tp[0]].error.value == 0
                  and tp[1] in known[tp[0]].partitions}
        lso = {tp: o for tp, (o, _ts) in client.list_offsets({tp: LATEST for tp in wanted}, READ_COMMITTED).items()}
        with self.lock:
            for q in self.queries.values():
                for s in q.sources.values():
                    s.lso = {tp: lso[tp] for tp in s.end if tp in lso}

    def _open_transactions(self) -> None:
        from .barrier import barrier_id
        from .txn_pool import sweep_pattern

        with self.lock:
            watched = {q.id: q.prefix for q in self.queries.values() if q.oncelog_sink}
        if not watched:
            return
        client = self._kafka_client()
        listed = [t for t in client.list_transactions(states=("Ongoing",)) if t[2] == "Ongoing"]
        counts: dict[str, dict[str, int]] = {}
        ids: dict[str, list[str]] = {}
        for qid, prefix in watched.items():
            task = re.compile(sweep_pattern(prefix) + rf"|{re.escape(prefix)}\.p\d+")
            c = counts[qid] = {"task": 0, "decider": 0, "barrier": 0}
            for txn_id, _pid, _state in listed:
                kind = ("decider" if txn_id == f"{prefix}.commits" else "barrier" if txn_id == barrier_id(prefix)
                        else "task" if task.fullmatch(txn_id) else None)
                if kind is not None:
                    c[kind] += 1
                    ids.setdefault(qid, []).append(txn_id)
        oldest: dict[str, float] = {}
        all_ids = [t for v in ids.values() for t in v]
        if all_ids:
            described = client.describe_transactions(all_ids)
            now_ms = time.time() * 1000
            for qid, txn_ids in ids.items():
                starts = [described[t].start_ms for t in txn_ids if t in described and described[t].start_ms >= 0]
                if starts:
                    oldest[qid] = max(0.0, (now_ms - min(starts)) / 1000)
        with self.lock:
            for qid, c in counts.items():
                q = self.queries.get(qid)
                if q is not None:
                    q.open_txns, q.oldest_open_s = c, oldest.get(qid, 0.0)

    def run(self) -> None:
        while not self.closing.is_set():
            self.wake.wait(self.poll_interval)
            self.wake.clear()
            if self.closing.is_set():
                break
            self.poll()
            self.closing.wait(min(self.poll_interval, 0.5))  # at most two rounds a second, however busy

    def close(self) -> None:
        self.closing.set()
        self.wake.set()
        with self.poll_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    # -- the scrape's side ---------------------------------------------------------------------

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        self.forget_expired()
        q_labels = ["query", "query_id"]
        fam = {}

        def family(kind, name, doc, labels):
            if name not in fam:
                cls = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily, "histogram": HistogramMetricFamily}
                fam[name] = cls[kind](name, doc, labels=labels)
            return fam[name]

        def counter(name, doc, labels, values, value):
            family("counter", name, doc, labels).add_metric(values, value)

        def gauge(name, doc, labels, values, value):
            family("gauge", name, doc, labels).add_metric(values, value)

        def hist(name, doc, labels, values, h: _Hist):
            family("histogram", name, doc, labels).add_metric(values, h.buckets(), h.sum)

        with self.lock:
            for q in self.queries.values():
                lv = [q.name, q.id]
                gauge("oncelog_spark_query_active", "1 while the query runs; 0 after it terminated, until its "
                      "series are dropped", q_labels, lv, 1 if q.active else 0)
                gauge("oncelog_spark_query_info", "The query's current run (Spark's runId) and sink", q_labels
                      + ["run_id", "sink"], lv + [q.run_id, q.sink], 1)
                counter("oncelog_spark_query_runs", "Starts of the query (a run) seen by this driver", q_labels,
                        lv, q.runs)
                counter("oncelog_spark_batches", "Micro-batches completed (progress events)", q_labels, lv,
                        q.batches)
                counter("oncelog_spark_empty_batches", "Micro-batches completed with no input row", q_labels, lv,
                        q.empty_batches)
                counter("oncelog_spark_input_rows", "Input rows of completed micro-batches (numInputRows)",
                        q_labels, lv, q.input_rows)
                if q.sink_rows is not None:  # foreachBatch reports -1: no figure rather than a false 0
                    counter("oncelog_spark_sink_rows", "Rows Spark handed to the sink (sink.numOutputRows), "
                            "re-executed batches included", q_labels, lv, q.sink_rows)
                gauge("oncelog_spark_last_batch_id", "The id of the latest completed micro-batch", q_labels, lv,
                      q.last_batch_id)
                gauge("oncelog_spark_last_progress_timestamp_seconds", "When the latest micro-batch ended, or "
                      "the latest idle event (Unix time)", q_labels, lv, q.last_progress_s)
                hist("oncelog_spark_batch_duration_seconds", "Micro-batch duration (durationMs.triggerExecution)",
                     q_labels, lv, q.batch_hist)
                hist("oncelog_spark_add_batch_duration_seconds", "The sink's part of a micro-batch: the tasks "
                     "and the sink's commit (durationMs.addBatch)", q_labels, lv, q.add_batch_hist)
                for phase, seconds in sorted(q.last_durations.items()):
                    gauge("oncelog_spark_last_batch_phase_seconds", "durationMs of the latest micro-batch, by "
                          "Spark's phase", q_labels + ["phase"], lv + [phase], seconds)
                for i, s in sorted(q.sources.items()):
                    sl = lv + [str(i), s.description]
                    counter("oncelog_spark_source_input_rows", "Input rows per source (sources[].numInputRows)",
                            q_labels + ["source", "description"], sl, s.rows)
                    for (topic, part), o in sorted(s.end.items()):
                        pl = lv + [str(i), topic, str(part)]
                        labels = q_labels + ["source", "topic", "partition"]
                        gauge("oncelog_spark_source_end_offset", "The latest completed micro-batch's end offset "
                              "(sources[].endOffset)", labels, pl, o)
                        if (topic, part) in s.latest:
                            gauge("oncelog_spark_source_latest_offset", "The newest offset the source saw when "
                                  "it planned the latest batch (sources[].latestOffset)", labels, pl,
                                  s.latest[(topic, part)])
                        if (topic, part) in s.lso:
                            gauge("oncelog_spark_source_lag_offsets", "The partition's last stable offset now "
                                  "minus the latest batch's end offset (offsets; markers included)", labels, pl,
                                  max(0, s.lso[(topic, part)] - o))
                if not q.oncelog_sink:
                    continue
                for outcome in ("committed", "already-committed", "no-output", "unknown"):
                    counter("oncelog_spark_sink_batches", "Micro-batches by what the oncelog sink's commit log "
                            "shows: committed by this run, already committed by an earlier run (re-executed), "
                            "no output", q_labels + ["outcome"], lv + [outcome], q.outcomes.get(outcome, 0))
                counter("oncelog_spark_sink_committed_batches", "Batches the sink made visible (DONE decisions) "
                        "while this endpoint watched", q_labels, lv, q.committed_batches)
                counter("oncelog_spark_sink_output_records", "Records of the batches the sink made visible "
                        "(DONE decisions' records)", q_labels, lv, q.output_records)
                hist("oncelog_spark_sink_commit_seconds", "From a batch's decision (its commit point) to its "
                     "DONE record: EndTxn of every task transaction and the wait until each is complete",
                     q_labels, lv, q.commit_hist)
                if q.open_txns is not None:
                    for kind, n in sorted(q.open_txns.items()):
                        gauge("oncelog_spark_open_transactions", "Ongoing transactions of the query's sink "
                              "(ListTransactions): task, decider, barrier", q_labels + ["kind"], lv + [kind], n)
                    gauge("oncelog_spark_open_transaction_max_age_seconds", "Age of the oldest Ongoing "
                          "transaction of the query's sink (0: none)", q_labels, lv, q.oldest_open_s or 0.0)
            for q in self.queries.values():
                if q.fresh_hist.count:
                    lv = [q.name, q.id]
                    hist("oncelog_spark_freshness_seconds", "A batch's end minus the newest record timestamp it "
                         "read (produce, or log append, to processed)", q_labels, lv, q.fresh_hist)
                    gauge("oncelog_spark_last_batch_freshness_seconds", "The freshness of the latest measured "
                          "batch", q_labels, lv, q.last_freshness)
            for outcome in ("stopped", "failed", "fenced", "batch-lost"):
                counter("oncelog_spark_query_terminations", "Queries terminated, by how: stopped, failed, "
                        "fenced (StaleRunError: another run moved on), batch-lost", ["outcome"], [outcome],
                        self.terminations.get(outcome, 0))
            for what, n in sorted(self.errors.items()):
                counter("oncelog_spark_metrics_errors", "Failed look-ups of this endpoint on the cluster, by "
                        "what (commit-log, transactions, lag, freshness)", ["what"], [what], n)
        return list(fam.values())


def _newest_timestamp(client, ranges, isolation: int) -> int | None:
    """The newest record timestamp (ms) at the end of a batch's read ``ranges`` ((topic,
    partition, start, end), end exclusive), from one Fetch of all its partitions, each at
    ``end - 2``: the range's last record, or the one before it when a transaction's marker takes
    ``end - 1``. Of each partition, the largest ``max_timestamp`` in the headers of the data
    batches holding offsets in [start, end), aborted ones left out (a batch that the range's end
    cuts counts whole). Only headers are read: no record is decoded, so a batch the response
    cuts short counts too (Kafka cuts one at ``partition_max_bytes``)."""
    from ..client.recordcodec import AbortedTransactions
    from ..protocol import records as wire_records
    from ..protocol.records import (ATTR_CONTROL, ATTR_TRANSACTIONAL, CONTROL_ABORT, HEADER, HEADER_SIZE,
                                    LOG_OVERHEAD, MAGIC_V2)

    bounds: dict[tuple[str, int], tuple[int, int]] = {}
    for topic, partition, start, end in ranges:
        tp = (topic, partition)
        s0, e0 = bounds.get(tp, (start, end))
        bounds[tp] = (min(s0, start), max(e0, end))
    if not bounds:
        return None
    positions = {tp: max(start, end - 2) for tp, (start, end) in bounds.items()}
    answers = client.fetch(positions, isolation_level=isolation, max_wait_ms=0,
                           partition_max_bytes=FRESHNESS_FETCH_BYTES)
    newest = None
    for tp, pf in answers.items():
        if tp not in bounds or pf.error.value != 0:
            continue
        start, end = bounds[tp]
        blob = pf.records
        view = memoryview(blob)
        filt = AbortedTransactions(pf.aborted) if pf.aborted is not None else None
        pos = 0
        while pos + HEADER_SIZE <= len(blob):
            (base, length, _epoch, magic, _crc, attributes, last_delta, _base_ts, max_ts, producer_id,
             _pepoch, _seq, _count) = HEADER.unpack_from(view, pos)
            size = length + LOG_OVERHEAD
            batch, whole = view[pos : pos + size], pos + size <= len(blob)
            pos += size
            if magic != MAGIC_V2 or base >= end:
                break
            last = base + last_delta
            if last < start:
                continue
            control = bool(attributes & ATTR_CONTROL)
            if filt is not None and attributes & ATTR_TRANSACTIONAL:
                if control and not whole:
                    break  # a marker cut short: which one it is cannot be read
                abort = control and wire_records.control_type(batch) == CONTROL_ABORT
                if filt.skip(producer_id, base, last, control, abort):
                    continue
            if not control and max_ts >= 0:
                newest = max_ts if newest is None else max(newest, max_ts)
    return newest


def _is_loopback(host: str) -> bool:
    """A loopback address, or ``localhost`` (no other name is resolved: an address the name
    stands for may change)."""
    import ipaddress

    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _Closed(RuntimeError):
    """The poller's client was asked for after :meth:`QueryMetrics.close`."""


class QueryMetricsHandle:
    """What :func:`serve_query_metrics` returns: ``address``, ``url``, ``refresh()``, ``close()``."""

    def __init__(self, spark, metrics: QueryMetrics, listener, server, thread, poller) -> None:
        self.spark = spark
        self.metrics = metrics
        self.listener = listener
        self._server = server
        self._thread = thread
        self._poller = poller
        host, port = server.server_address[:2]
        self.address = (host, port)
        self.url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/metrics"

    def refresh(self, *, transactions: bool = True) -> None:
        """One poll of the cluster now (the background thread does it every ``poll_interval``)."""
        self.metrics.poll(transactions=transactions)

    def close(self) -> None:
        """Unregister the listener, stop the poller and the HTTP server. Idempotent."""
        if self._server is None:
            return
        try:
            self.spark.streams.removeListener(self.listener)
        except Exception as exc:  # noqa: BLE001 - the session may be stopped already
            log.debug("removeListener: %s", exc)
        self.metrics.close()
        self._server.shutdown()
        self._server.server_close()
        self._poller.join(5)
        self._server = None

    def __enter__(self) -> "QueryMetricsHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def serve_query_metrics(spark, host: str = "127.0.0.1", port: int = 0, bootstrap: str | None = None, *,
                        kafka: dict[str, str] | None = None, commit_log_topic: str = DEFAULT_COMMIT_LOG,
                        prefixes: dict[str, str] | None = None, poll_interval: float = 2.0,
                        txn_interval: float = 5.0, forget_after: float = 300.0,
                        allow_remote: bool = False) -> QueryMetricsHandle:
    """Register a ``StreamingQueryListener`` on ``spark`` and serve the queries' metrics on
    ``http://host:port/metrics`` from this (the driver's) process.

    ``bootstrap`` (and ``kafka``: client settings in Kafka's names, ``kafka.`` prefix optional,
    e.g. security) is the cluster of the oncelog sink and of the sources: without it only the
    figures of Spark's progress events are served. ``commit_log_topic``: the sink's
    ``commitLogTopic``; ``prefixes``: ``{query name or id: transactionalIdPrefix}`` for queries
    that set that option (default ``oncelog-<query id>``). ``forget_after``: seconds after a
    query terminated when its series go.

    The endpoint has no authentication: a ``host`` other than a loopback address (``127.0.0.1``,
    ``::1``, ``localhost``) is refused with ValueError unless ``allow_remote=True`` says that
    serving it beyond this machine is meant."""
    if not allow_remote and not _is_loopback(host):
        raise ValueError(f"serve_query_metrics: host {host!r} is not a loopback address and the endpoint has no "
                         "authentication; pass allow_remote=True to serve it beyond this machine")
    from prometheus_client import CollectorRegistry, start_http_server
    from pyspark.sql.streaming import StreamingQueryListener

    metrics = QueryMetrics(bootstrap=bootstrap, kafka=kafka, commit_log_topic=commit_log_topic, prefixes=prefixes,
                           poll_interval=poll_interval, txn_interval=txn_interval, forget_after=forget_after)

    class OncelogQueryMetrics(StreamingQueryListener):
        """oncelog: the queries' metrics (oncelog.spark.metrics)."""

        def onQueryStarted(self, event) -> None:
            try:
                metrics.started(str(event.id), str(event.runId), event.name)
            except Exception:  # noqa: BLE001 - a listener must never fail Spark's listener bus
                log.exception("oncelog.spark.metrics: onQueryStarted")

        def onQueryProgress(self, event) -> None:
            try:
                metrics.progress(event.progress)
            except Exception:  # noqa: BLE001
                log.exception("oncelog.spark.metrics: onQueryProgress")

        def onQueryIdle(self, event) -> None:
            try:
                metrics.idle(str(event.id), event.timestamp)
            except Exception:  # noqa: BLE001
                log.exception("oncelog.spark.metrics: onQueryIdle")

        def onQueryTerminated(self, event) -> None:
            try:
                metrics.terminated(str(event.id), event.exception)
            except Exception:  # noqa: BLE001
                log.exception("oncelog.spark.metrics: onQueryTerminated")

    class _Collector:
        def collect(self):
            return metrics.collect()

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    server, thread = start_http_server(port, addr=host, registry=registry)
    listener = OncelogQueryMetrics()
    try:
        spark.streams.addListener(listener)
    except BaseException:
        server.shutdown()
        server.server_close()
        raise
    poller = threading.Thread(target=metrics.run, name="oncelog-spark-metrics", daemon=True)
    poller.start()
    return QueryMetricsHandle(spark, metrics, listener, server, thread, poller)
