"""The exactly-once auditor: does every committed input record have exactly one output?

``oncelog audit`` (and :func:`audit`) reads a pipeline's input topics and output topics from any
Kafka-protocol cluster and matches each output record to the input record it came from through a
header (``oncelog.source`` by default) whose value is ``topic:partition:offset`` of that input.
It counts the anomalies of an exactly-once pipeline (after Jepsen's list, see EOS-REFERENCE.md):

* ``lost``: a committed input record with no output;
* ``duplicated``: an extra output of one committed input (an input with n outputs adds n - 1);
* ``aborted_reads``: an output whose input record is in an aborted transaction;
* ``phantom``: an output whose input record does not exist: unknown topic or partition, an offset
  outside the partition's log, an offset that holds no data record (a transaction marker, a gap),
  or a missing or malformed header. The last kind is also counted on its own as
  ``missing_header`` (a subset of ``phantom``).

Definitions, per input partition, over the *decided range* ``[log start offset, LSO)``, read once
at read_uncommitted and once at read_committed:

* an input record *exists* if read_uncommitted returns it;
* it is *committed* if read_committed returns it (non-transactional records are committed too);
* it is *aborted* if it exists but is not committed. Below the last stable offset every
  transaction is decided, so "not committed" there really means aborted.

Records at or above an input partition's LSO belong to (or follow) a transaction still open when
the audit took its snapshot: they are neither lost nor aborted yet. Outputs referring to them are
counted as ``pending``, not as an anomaly. :func:`audit` first waits up to ``wait_stable`` seconds
(default: ``timeout``; 0 for a live pipeline that always has a transaction open) for every input
and output partition to become stable (LSO == high watermark); partitions still open
after that are listed in ``open_transactions`` and the result says what was not audited. On the
output side, records past the LSO are invisible at read_committed, so inputs whose only output sits
in an open transaction show up as lost: audit a drained pipeline, or read ``open_transactions``.

Snapshot order matters on a live pipeline: the output end offsets are taken *before* the input end
offsets, so every output the audit reads was written before the input snapshot, when its input
already existed; no output is called phantom merely because its input arrived after the snapshot.
(Inputs the pipeline has not processed yet do count as lost: the verdict is for a drained pipeline.)

Caveats, by design: several output topics are one logical output, so an input written to two of
them counts as duplicated (audit a fan-out one output topic at a time); an output naming an input
offset below the input's log start offset (deleted by retention) is phantom, as it cannot be checked.

Memory: one byte of state per input offset (a ``bytearray`` per input partition, indexed by
``offset - log start offset``) holding three bits: present, committed, matched. Output records are
classified the moment they are read (inputs are read first, so their state is final), so nothing is
kept per output. Tens of millions of input records cost tens of MB; counting the summary is
``bytearray.count`` at C speed. Duplicates are counted exactly: the "matched" bit turns the second
and later outputs of an input into duplicates, whatever their number. The consumer's own fetch and
prefetch buffers add a constant 250-350 MB of RSS at librdkafka's default fetch sizes (measured
with 1M and 5M records: a plateau, not a slope); ``fetch.max.bytes`` and
``max.partition.fetch.bytes`` in the client config trade that against speed.

Layers: :class:`SourceMatcher` is the pure matching logic (no I/O: fed input offsets and output
header values, it gives an :class:`AuditResult`); the reader layer below it uses confluent-kafka,
the reference client, so the auditor trusts the client and not oncelog's own code.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

log = logging.getLogger(__name__)

DEFAULT_HEADER = "oncelog.source"

# State bits of one input offset.
PRESENT = 1    # seen at read_uncommitted: a data record exists at this offset
COMMITTED = 2  # seen at read_committed
MATCHED = 4    # an output referring to it has been seen

_COMMITTED_STATE = PRESENT | COMMITTED          # a committed input with no output yet (lost if it stays so)
_MATCHED_STATE = PRESENT | COMMITTED | MATCHED  # a committed input with its output
# Cache at most this many parsed "topic:partition" prefixes of outputs pointing to unknown
# partitions, so garbage headers cannot grow the cache without bound.
_MAX_UNKNOWN_PREFIXES = 10_000


class AuditError(Exception):
    """The audit could not be run (connection, unknown topic, no progress): not an anomaly."""


@dataclass
class AuditResult:
    """Counts of one audit. The four anomaly counts decide :attr:`ok`."""

    input_records: int = 0    # committed input records in the decided range (what should be processed)
    output_records: int = 0   # output records read at read_committed
    lost: int = 0
    duplicated: int = 0
    aborted_reads: int = 0
    phantom: int = 0
    # Extra detail (never part of ok):
    missing_header: int = 0   # outputs without a parsable source header; included in phantom
    aborted_inputs: int = 0   # input records of aborted transactions (exist, not committed)
    pending: int = 0          # outputs whose input is past the input's LSO: undecided at audit time
    open_transactions: list[str] = field(default_factory=list)  # "topic:partition" with LSO < high watermark
    examples: dict[str, list[str]] = field(default_factory=dict)  # a few instances of each anomaly
    seconds: float = 0.0      # wall time of the audit (reading included)

    ANOMALIES = ("lost", "duplicated", "aborted_reads", "phantom")

    @property
    def ok(self) -> bool:
        return not any(getattr(self, name) for name in self.ANOMALIES)

    def to_dict(self) -> dict:
        return {
            "input_records": self.input_records, "output_records": self.output_records,
            "lost": self.lost, "duplicated": self.duplicated, "aborted_reads": self.aborted_reads,
            "phantom": self.phantom, "ok": self.ok, "missing_header": self.missing_header,
            "aborted_inputs": self.aborted_inputs, "pending": self.pending,
            "open_transactions": list(self.open_transactions),
            "examples": {k: list(v) for k, v in self.examples.items()}, "seconds": round(self.seconds, 3),
        }


class _InputPartition:
    """State bytes of one input partition: ``state[offset - start]``.

    Declared partitions (known log start offset, LSO and high watermark) are allocated once and
    refuse marks outside ``[start, stable_end)``. Undeclared ones start at the first offset marked
    and grow in both directions, doubling, so marking n offsets costs amortised O(n).
    """

    __slots__ = ("topic", "partition", "start", "state", "stable_end", "end", "declared")

    def __init__(self, topic: str, partition: int, start: int | None = None, stable_end: int | None = None,
                 end: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.declared = start is not None
        if self.declared:
            if stable_end is None or stable_end < start:
                raise ValueError(f"{topic}:{partition}: stable end {stable_end} below start {start}")
            end = stable_end if end is None else end
            if end < stable_end:
                raise ValueError(f"{topic}:{partition}: end {end} below stable end {stable_end}")
            self.start, self.stable_end, self.end = start, stable_end, end
            self.state = bytearray(stable_end - start)
        else:
            self.start, self.stable_end, self.end = 0, 0, 0
            self.state = bytearray()

    def _grow_to(self, low: int, high: int) -> None:
        """Make ``[low, high]`` addressable (undeclared partitions only)."""
        if not self.state:
            self.start = low
            self.state = bytearray(max(high - low + 1, 64))
        if low < self.start:
            extra = max(self.start - low, len(self.state))
            self.state[0:0] = bytes(extra)
            self.start -= extra
        if high >= self.start + len(self.state):
            self.state.extend(bytes(max(high - self.start + 1 - len(self.state), len(self.state))))
        # Spare capacity holds no record: state 0, which classifies like an offset out of range.
        self.stable_end = self.end = self.start + len(self.state)

    def mark(self, offsets: Sequence[int], bits: int) -> None:
        if not offsets:
            return
        low, high = min(offsets), max(offsets)
        if self.declared:
            if low < self.start or high >= self.stable_end:
                raise ValueError(f"{self.topic}:{self.partition}: offsets {low}..{high} outside the declared "
                                 f"range [{self.start}, {self.stable_end})")
        elif not self.state or low < self.start or high >= self.start + len(self.state):
            self._grow_to(low, high)
        state, start = self.state, self.start
        for o in offsets:
            state[o - start] |= bits


class SourceMatcher:
    """Pure matching logic: feed input offsets, then output source references; read the result.

    Invariant: all inputs are marked before the first output is added (an output is classified on
    arrival against final input state; the first :meth:`add_sources` seals the inputs).
    """

    def __init__(self, max_examples: int = 5) -> None:
        self._parts: dict[tuple[str, int], _InputPartition] = {}
        self._by_prefix: dict[bytes, _InputPartition | None] = {}
        self._unknown_prefixes = 0
        self._sealed = False
        self.max_examples = max_examples
        self.output_records = 0
        self.duplicated = 0
        self.aborted_reads = 0
        self.phantom = 0
        self.missing_header = 0
        self.pending = 0
        self.examples: dict[str, list[str]] = {"duplicated": [], "aborted_reads": [], "phantom": []}

    # -- inputs ---------------------------------------------------------------------------------
    def declare_input(self, topic: str, partition: int, start: int, stable_end: int,
                      end: int | None = None) -> None:
        """Declare an input partition's decided range ``[start, stable_end)`` (log start offset to
        LSO) and its high watermark ``end``; outputs referring to ``[stable_end, end)`` are pending.
        Declare before marking: a declaration allocates the partition's state afresh."""
        self._check_open()
        if (topic, partition) in self._parts:
            raise ValueError(f"{topic}:{partition} is already an input partition")
        self._parts[(topic, partition)] = _InputPartition(topic, partition, start, stable_end, end)

    def mark_inputs(self, topic: str, partition: int, offsets: Sequence[int], *, committed: bool) -> None:
        """Record input offsets seen at read_uncommitted (``committed=False``) or at read_committed
        (``committed=True``; a committed record also exists)."""
        self._check_open()
        part = self._parts.get((topic, partition))
        if part is None:
            part = self._parts[(topic, partition)] = _InputPartition(topic, partition)
        part.mark(offsets, PRESENT | COMMITTED if committed else PRESENT)

    def _check_open(self) -> None:
        if self._sealed:
            raise RuntimeError("inputs are sealed: every input must be marked before the first output")

    # -- outputs --------------------------------------------------------------------------------
    def add_source(self, source: bytes | str | None, where: str | None = None) -> None:
        self.add_sources([source], None if where is None else (lambda _i: where))

    def add_sources(self, sources: Sequence[bytes | str | None], locate: Callable[[int], str] | None = None) -> None:
        """Classify a batch of output records by their source header values (``None`` when the
        header is missing). ``locate(i)`` names the i-th output for the examples; it is only called
        for the few anomalies kept as examples."""
        self._sealed = True
        self.output_records += len(sources)
        by_prefix = self._by_prefix
        for i, src in enumerate(sources):
            if src is None:
                self._missing(i, src, locate)
                continue
            if isinstance(src, str):
                src = src.encode()
            prefix, _, off = src.rpartition(b":")
            try:
                part = by_prefix[prefix]
            except KeyError:
                part = self._resolve(prefix)
                if part is False:  # not of the form topic:partition
                    self._missing(i, src, locate)
                    continue
            try:
                o = int(off)
            except ValueError:
                self._missing(i, src, locate)
                continue
            if part is None or o < part.start or o >= part.end:
                self._anomaly("phantom", i, src, locate)
                continue
            if o >= part.stable_end:
                self.pending += 1
                continue
            idx = o - part.start
            s = part.state[idx]
            if s & COMMITTED:
                if s & MATCHED:
                    self._anomaly("duplicated", i, src, locate)
                else:
                    part.state[idx] = s | MATCHED
            elif s & PRESENT:
                self._anomaly("aborted_reads", i, src, locate)
            else:  # a transaction marker, a gap, or spare capacity: no record there
                self._anomaly("phantom", i, src, locate)

    def _resolve(self, prefix: bytes):
        """``b"topic:partition"`` to its input partition; None for a well-formed reference to no
        input partition, False for a malformed one."""
        topic, sep, p = prefix.rpartition(b":")
        try:
            partition = int(p)
            name = topic.decode()
        except (ValueError, UnicodeDecodeError):
            return False
        if not sep or not name:
            return False
        part = self._parts.get((name, partition))
        if part is not None or self._unknown_prefixes < _MAX_UNKNOWN_PREFIXES:
            self._unknown_prefixes += part is None
            self._by_prefix[prefix] = part
        return part

    def _missing(self, i: int, src, locate) -> None:
        self.missing_header += 1
        self._anomaly("phantom", i, src, locate)

    def _anomaly(self, kind: str, i: int, src, locate) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        ex = self.examples[kind]
        if len(ex) < self.max_examples:
            what = "no source header" if src is None else (src.decode(errors="replace") if isinstance(src, bytes) else src)
            ex.append(f"{locate(i)} -> {what}" if locate else what)

    # -- summary --------------------------------------------------------------------------------
    def result(self) -> AuditResult:
        committed = lost = aborted_inputs = 0
        lost_examples: list[str] = []
        for part in self._parts.values():
            st = part.state
            n_lost = st.count(_COMMITTED_STATE)
            lost += n_lost
            committed += n_lost + st.count(_MATCHED_STATE)
            aborted_inputs += st.count(PRESENT)  # MATCHED is only ever set on committed inputs
            pos = 0
            while n_lost and len(lost_examples) < self.max_examples:
                pos = st.find(_COMMITTED_STATE, pos)
                if pos < 0:
                    break
                lost_examples.append(f"{part.topic}:{part.partition}:{part.start + pos}")
                pos += 1
        return AuditResult(
            input_records=committed, output_records=self.output_records, lost=lost, duplicated=self.duplicated,
            aborted_reads=self.aborted_reads, phantom=self.phantom, missing_header=self.missing_header,
            aborted_inputs=aborted_inputs, pending=self.pending,
            examples={k: v for k, v in [("lost", lost_examples), *self.examples.items()] if v})

    def memory_bytes(self) -> int:
        """Bytes of per-offset input state: the part of the audit's memory that grows with the log."""
        return sum(len(p.state) for p in self._parts.values())


# -- reading a cluster (confluent-kafka) ------------------------------------------------------------

ProgressFn = Callable[[str, int, int], None]  # (phase, done, total), called after every fetched batch

_BATCH = 10_000


def client_config(bootstrap: str, config: Mapping[str, object] | None = None) -> dict:
    """librdkafka properties for the audit's clients; keys may carry a ``kafka.`` prefix (the Spark
    connector's option style) so one options dict serves both."""
    from .client.security import librdkafka_config

    plain = {(key[len("kafka."):] if key.startswith("kafka.") else key): value for key, value in (config or {}).items()}
    # Security settings may use the Java client's names (as Spark users write them): translated
    # once, as the connector does; everything else goes to librdkafka as given.
    conf: dict = {k: v for k, v in plain.items() if not k.lower().startswith(_SECURITY_PREFIXES)}
    conf.update(librdkafka_config({k: str(v) for k, v in plain.items()}, bootstrap))
    return conf


_SECURITY_PREFIXES = ("ssl.", "sasl.", "security.protocol", "enable.sasl.")


def _topics(names: str | Iterable[str]) -> list[str]:
    if isinstance(names, str):
        names = [names]
    out: list[str] = []
    for n in names:  # "a,b" or ["a", "b"]: topic names cannot hold commas
        out.extend(t.strip() for t in n.split(",") if t.strip())
    return list(dict.fromkeys(out))


def _partitions(admin, topics: list[str], timeout: float) -> list[tuple[str, int]]:
    # Metadata for all topics, not for the named ones: a named Metadata request may auto-create a
    # topic on brokers with auto.create.topics.enable, and an audit must not create its subject.
    from confluent_kafka import KafkaException

    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise AuditError(f"cannot reach the cluster: {exc.args[0]}") from None
    out = []
    for name in topics:
        t = md.topics.get(name)
        if t is None or t.error is not None:
            raise AuditError(f"unknown topic {name!r}" + (f": {t.error}" if t is not None else ""))
        out.extend((name, p) for p in sorted(t.partitions))
    return out


def _offsets(admin, parts: list[tuple[str, int]], timeout: float) -> dict[tuple[str, int], tuple[int, int, int]]:
    """``{(topic, partition): (log start offset, last stable offset, high watermark)}`` via
    ListOffsets, batched: earliest, then latest at read_committed (the LSO) and read_uncommitted."""
    from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    def query(spec, isolation) -> dict:
        futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in parts}, isolation_level=isolation,
                                     request_timeout=timeout)
        try:
            return {(tp.topic, tp.partition): f.result(timeout).offset for tp, f in futures.items()}
        except KafkaException as exc:
            raise AuditError(f"ListOffsets failed: {exc.args[0]}") from None

    if not parts:
        return {}
    low = query(OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED)
    # LSO before high watermark: a transaction that begins in between makes LSO < HW and is seen as
    # open; the other order could see an HW from before and an LSO from after new records.
    lso = query(OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
    high = query(OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)
    return {k: (low[k], lso[k], high[k]) for k in parts}


def _read(conf: dict, isolation: str, spans: dict[tuple[str, int], tuple[int, int]], *, timeout: float,
          progress: ProgressFn | None, phase: str):
    """Read every partition of ``spans`` (``{(topic, partition): (start, end)}``) from start to end
    at ``isolation``; yields ``(topic, partition, messages)`` runs of data records with offsets in
    ``[start, end)``, in offset order per partition.

    A partition is finished when the consumer's position reaches its end offset, never by counting
    records: at read_committed aborted records and transaction markers take offsets but are never
    returned, so a partition may end in (or hold only) records nobody sees.
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    todo = {k: v for k, v in spans.items() if v[0] < v[1]}
    total = sum(e - s for s, e in todo.values())
    if progress:
        progress(phase, 0, total)
    if not todo:
        return
    consumer = Consumer({
        # Tunables first, so the caller's config can override them.
        "fetch.wait.max.ms": 100, **conf,
        "group.id": f"oncelog-audit-{uuid.uuid4().hex}", "enable.auto.commit": False,
        "enable.auto.offset.store": False, "isolation.level": isolation, "enable.partition.eof": True,
        # A jump of the log start offset (retention) mid-audit must be an error, not a silent skip.
        "auto.offset.reset": "error",
    })
    tps = {k: TopicPartition(k[0], k[1]) for k in todo}
    finished = 0
    last_done, last_change = -1, time.monotonic()
    eof = KafkaError._PARTITION_EOF
    try:
        consumer.assign([TopicPartition(t, p, s) for (t, p), (s, _e) in todo.items()])
        while todo:
            msgs = consumer.consume(_BATCH, 0.2)
            run: list = []
            cur_t, cur_p, cur_end = None, -1, 0
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() != eof:
                        _consumer_error(err, phase)
                    continue
                t, p = m.topic(), m.partition()
                if p != cur_p or t != cur_t:
                    if run:
                        yield cur_t, cur_p, run
                    run = []
                    cur_t, cur_p = t, p
                    cur_end = spans[(t, p)][1]
                if m.offset() < cur_end:  # at read_uncommitted a fetch can run past the snapshot
                    run.append(m)
            if run:
                yield cur_t, cur_p, run
            done = finished
            for tp in consumer.position([tps[k] for k in todo]):
                key = (tp.topic, tp.partition)
                start, end = todo[key]
                if tp.offset >= end:
                    finished += end - start
                    done += end - start
                    del todo[key]
                    consumer.pause([tps[key]])
                elif tp.offset > start:  # negative while nothing was fetched yet
                    done += tp.offset - start
            if progress:
                progress(phase, done, total)
            now = time.monotonic()
            if done != last_done:
                last_done, last_change = done, now
            elif now - last_change > timeout:
                stuck = ", ".join(f"{t}:{p}" for t, p in list(todo)[:5])
                raise AuditError(f"{phase}: no progress for {timeout:g}s (partitions {stuck}); is the cluster up?")
    finally:
        consumer.close()


def _consumer_error(err, phase: str) -> None:
    from confluent_kafka import KafkaError

    # After these, reading on cannot give a true answer: raise rather than wait for the timeout.
    fatal = {KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE, KafkaError.UNKNOWN_TOPIC_OR_PART,
             KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC, KafkaError.TOPIC_AUTHORIZATION_FAILED}
    if err.fatal() or err.code() in fatal:
        raise AuditError(f"{phase}: {err.str()}")
    # Transport errors and the like: librdkafka retries by itself; the no-progress timeout decides.
    log.warning("%s: %s", phase, err.str())


def audit(bootstrap: str, inputs: str | Iterable[str], outputs: str | Iterable[str], header: str = DEFAULT_HEADER,
          *, config: Mapping[str, object] | None = None, timeout: float = 30.0,
          wait_stable: float | None = None, progress: ProgressFn | None = None,
          max_examples: int = 5) -> AuditResult:
    """Audit a pipeline from ``inputs`` to ``outputs`` on any Kafka-protocol cluster.

    ``config``: extra client properties (``security.protocol``, ``sasl.*``, ...; a ``kafka.``
    prefix is dropped). ``timeout``: seconds for the cluster to answer and for the reading to make
    progress. ``wait_stable``: seconds to wait for open transactions (LSO < high watermark) to
    finish before auditing; defaults to ``timeout``. Raises :class:`AuditError` when
    the audit cannot be done; anomalies are in the result, never raised.
    """
    from confluent_kafka.admin import AdminClient

    t0 = time.monotonic()
    in_topics, out_topics = _topics(inputs), _topics(outputs)
    if not in_topics or not out_topics:
        raise AuditError("need at least one input topic and one output topic")
    conf = client_config(bootstrap, config)
    admin = AdminClient(conf)
    in_parts = _partitions(admin, in_topics, timeout)
    out_parts = _partitions(admin, out_topics, timeout)

    wait = timeout if wait_stable is None else wait_stable
    deadline = t0 + wait
    while True:
        # Outputs first: see the module docstring (snapshot order on a live pipeline).
        out_off = _offsets(admin, out_parts, timeout)
        in_off = _offsets(admin, in_parts, timeout)
        unstable = [f"{t}:{p}" for offs in (in_off, out_off) for (t, p), (_lo, lso, hw) in offs.items() if lso < hw]
        now = time.monotonic()
        if not unstable or now >= deadline:
            break
        if progress:
            progress(f"waiting for {len(unstable)} open transaction(s)", int(now - t0), int(wait))
        time.sleep(min(0.5, deadline - now))
    if unstable:
        log.warning("open transactions after %.0fs in %s: records past their last stable offset are not audited",
                    wait, ", ".join(unstable[:10]))

    matcher = SourceMatcher(max_examples)
    for (t, p), (lo, lso, hw) in in_off.items():
        matcher.declare_input(t, p, lo, lso, hw)
    in_spans = {k: (lo, lso) for k, (lo, lso, _hw) in in_off.items()}
    for isolation, committed in (("read_uncommitted", False), ("read_committed", True)):
        for t, p, msgs in _read(conf, isolation, in_spans, timeout=timeout, progress=progress,
                                phase=f"input {isolation}"):
            matcher.mark_inputs(t, p, [m.offset() for m in msgs], committed=committed)

    out_spans = {k: (lo, lso) for k, (lo, lso, _hw) in out_off.items()}
    for t, p, msgs in _read(conf, "read_committed", out_spans, timeout=timeout, progress=progress,
                            phase="output read_committed"):
        sources = []
        for m in msgs:
            value = None
            hs = m.headers()
            if hs:
                for k, v in hs:
                    if k == header:
                        value = v
                        break
            sources.append(value)
        matcher.add_sources(sources, lambda i, t=t, p=p, msgs=msgs: f"{t}:{p}:{msgs[i].offset()}")

    result = matcher.result()
    result.open_transactions = unstable
    result.seconds = time.monotonic() - t0
    return result


# -- command line -------------------------------------------------------------------------------

def audit_command(args: argparse.Namespace) -> int:
    """``oncelog audit``: exit 0 when clean, 1 when an anomaly was found, 2 when the audit could
    not be done (unknown topic, unreachable cluster, bad arguments)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    try:
        config = dict(kv.split("=", 1) for kv in args.config)
    except ValueError:
        print("oncelog audit: --config takes KEY=VALUE", file=sys.stderr)
        return 2
    err_console = Console(stderr=True)
    bar = Progress(TextColumn("{task.description:<34}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=err_console, disable=not err_console.is_terminal, transient=False)
    tasks: dict[str, int] = {}

    def progress(phase: str, done: int, total: int) -> None:
        if phase.startswith("waiting"):  # one line for the wait, whatever the count of open partitions
            phase, label = "waiting", phase
        else:
            label = phase
        if phase not in tasks:
            tasks[phase] = bar.add_task(label, total=total)
        bar.update(tasks[phase], description=label, completed=done, total=total)

    try:
        with bar:
            result = audit(args.bootstrap, args.input, args.output, args.header, config=config,
                           timeout=args.timeout, wait_stable=args.wait_stable, progress=progress)
    except AuditError as exc:
        print(f"oncelog audit: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print_result(Console(), result, args.input, args.output)
    return 0 if result.ok else 1


def print_result(console, result: AuditResult, inputs, outputs) -> None:
    from rich.table import Table

    table = Table(title=f"audit: {', '.join(_topics(inputs))} → {', '.join(_topics(outputs))}")
    table.add_column("")
    table.add_column("records", justify="right")
    table.add_row("input records (committed)", f"{result.input_records:,}")
    table.add_row("output records (read_committed)", f"{result.output_records:,}")
    for name in AuditResult.ANOMALIES:
        n = getattr(result, name)
        table.add_row(name.replace("_", " "), f"[bold red]{n:,}[/]" if n else "0")
    table.add_row("[dim]aborted input records[/]", f"[dim]{result.aborted_inputs:,}[/]")
    if result.missing_header:
        table.add_row("[dim]… phantom without a source header[/]", f"[dim]{result.missing_header:,}[/]")
    if result.pending or result.open_transactions:
        table.add_row("[dim]pending (input past its LSO)[/]", f"[dim]{result.pending:,}[/]")
    console.print(table)
    for kind, examples in result.examples.items():
        console.print(f"[bold]{kind}[/], e.g.: " + "; ".join(examples))
    if result.open_transactions:
        console.print(f"[yellow]open transactions[/] in {', '.join(result.open_transactions[:10])}"
                      f"{' …' if len(result.open_transactions) > 10 else ''}: records past their last stable "
                      "offset were not audited (inputs there are neither lost nor aborted; outputs there unseen)")
    rate = (result.input_records + result.output_records) / result.seconds if result.seconds else 0
    verdict = "[bold green]exactly once[/]" if result.ok else "[bold red]NOT exactly once[/]"
    console.print(f"{verdict} ({result.seconds:.1f}s, {rate:,.0f} records/s)")
