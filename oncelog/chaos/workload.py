"""The chaos workload's worker processes: each runs one client role and writes its history.

A worker is a process (``python -m oncelog.chaos.workload SPEC.json``) so the nemesis can
SIGKILL or SIGSTOP it as it would a real application; a restarted worker is a new *process* in
the history (a new number, a new value space). Roles:

* ``producer`` — an idempotent producer (acks=all): each op sends 1-8 values to random
  partitions and waits for their acknowledgements.
* ``txn`` — a transactional producer with a read_committed consumer assigned to every
  partition of the topic: each transaction polls what is new (reads) and sends 1-4 values to
  random partitions (writes); some transactions are aborted on purpose. Reads and writes on the
  same topic make write-read dependencies between transactions (cycles are checked).
* ``ctp`` — consume-transform-produce: a read_committed group consumer of the topic and a
  transactional producer writing one new value per record read to the output topic, committing
  the consumer's offsets in the same transaction (Kafka's exactly-once loop).
* ``group`` — a read_committed consumer in a group (subscribe; sessions start at each assign).
* ``reader`` — a read_committed consumer assigned every partition from the beginning.
* ``final`` — the run's last reader: every partition from the beginning to its end offset.
* ``share`` — a share-group member (KIP-932, explicit acknowledgement) of the topic: each
  delivery written (``share-poll``), then ACCEPTed — RELEASEd on its first delivery when the
  value ends in 3, REJECTed when it ends in 7 — and the acknowledgements committed
  (``share-ack``, the outcome per acknowledgement).
* ``share-final`` — after the final reader: the share group's last member ACCEPTs what is left
  until nothing arrives for a few seconds.

Every op is written (and flushed to the OS) before the client is asked to do it, so a killed
worker leaves at worst an invoke without completion, which the checker reads as unknown.
Values are ``process << 32 | n``: unique in the run.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from dataclasses import dataclass, field

TXN_TIMEOUT_MS = 10_000  # a killed or paused transactional worker's transaction aborts within it
CALL_TIMEOUT_S = 10      # one transactional call; a longer wait ends the op as unknown
# The worker's own limit on one op: a client call that outlives it ends the process (the op stays
# unknown; the run starts a new one). librdkafka 2.16's send_offsets_to_transaction can wait
# past its timeout for good when the group coordinator lookup it sent is lost to a broker restart.
OP_TIMEOUT_S = 45


@dataclass
class WorkerSpec:
    role: str
    process: int
    bootstrap: str
    topic: str
    partitions: int
    history: str
    seed: int
    out_topic: str = ""
    group: str = ""
    transactional_id: str = ""
    abort_ratio: float = 0.15
    pace_s: float = 0.01          # pause between ops (each op waits for its answer anyway)
    client: dict = field(default_factory=dict)  # extra client settings (security, ...)
    final_deadline_s: float = 60.0
    not_before_ns: int = 0        # share-final: not drained before this time (a dead member's session)

    def to_json(self) -> str:
        return json.dumps(self.__dict__)


class History:
    """Append-only JSONL history of one worker process; every line is one ``write(2)``. Tracks
    when the pending invoke was written, for the watchdog."""

    def __init__(self, path: str, process: int) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.process = process
        self.pending_since: float | None = None

    def op(self, type_: str, f: str, value, **extra) -> None:
        op = {"process": self.process, "type": type_, "f": f, "time": time.time_ns(), "value": value, **extra}
        os.write(self.fd, (json.dumps(op, separators=(",", ":")) + "\n").encode())
        self.pending_since = time.monotonic() if type_ == "invoke" else None


def _watchdog(hist: History, limit_s: float) -> None:
    """End the process when one op has been pending longer than ``limit_s`` (a client call that
    never returns): its invoke stays without completion, which the checker reads as unknown."""
    import threading

    def watch() -> None:
        while True:
            time.sleep(1)
            since = hist.pending_since
            if since is not None and time.monotonic() - since > limit_s:
                os.write(2, f"chaos worker {hist.process}: an op pending for {limit_s:.0f} s; exiting\n".encode())
                os._exit(70)

    threading.Thread(target=watch, name="watchdog", daemon=True).start()


class Stop:
    """SIGTERM asks the worker to finish its current op and exit."""

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGTERM, self._set)
        signal.signal(signal.SIGINT, self._set)

    def _set(self, *_):
        self.requested = True


def _pname(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


def _config(spec: WorkerSpec, **kw) -> dict:
    conf = {"bootstrap.servers": spec.bootstrap, "client.id": f"chaos-{spec.role}-{spec.process}",
            "socket.connection.setup.timeout.ms": 5000, "reconnect.backoff.max.ms": 500, **spec.client}
    conf.update(kw)
    return conf


class _Values:
    def __init__(self, process: int) -> None:
        self.base, self.n = process << 32, 0

    def next(self) -> int:
        self.n += 1
        return self.base | self.n


def _delivered(results: dict):
    def callback(err, msg) -> None:
        results[int(msg.value())] = (err, msg.offset() if err is None else None)
    return callback


def _send_results(sends, results) -> tuple[list, bool]:
    """The sends with their acknowledged offsets (None when unknown), and whether all were acked."""
    out, all_ok = [], True
    for partition, value in sends:
        err, offset = results.get(value, ("not delivered", None))
        all_ok &= err is None
        out.append(["send", partition, value, offset if err is None else None])
    return out, all_ok


def run_producer(spec: WorkerSpec, hist: History, stop: Stop) -> None:
    import confluent_kafka as ck

    rng, values = random.Random(spec.seed), _Values(spec.process)
    p = ck.Producer(_config(spec, **{"enable.idempotence": True, "acks": "all", "linger.ms": 2,
                                     "message.timeout.ms": 15000}))
    while not stop.requested:
        sends = [(_pname(spec.topic, rng.randrange(spec.partitions)), values.next()) for _ in range(rng.randint(1, 8))]
        hist.op("invoke", "send", [["send", tp, v] for tp, v in sends])
        results: dict = {}
        cb = _delivered(results)
        for tp, v in sends:
            p.produce(spec.topic, value=str(v).encode(), partition=int(tp.rsplit("/", 1)[1]), on_delivery=cb)
        p.flush(20)
        out, ok = _send_results(sends, results)
        # A delivery error of an idempotent producer does not say the record is absent.
        hist.op("ok" if ok else "info", "send", out)
        time.sleep(spec.pace_s)
    p.flush(10)


def _txn_error(exc) -> tuple[str, bool]:
    """(what to write, must the producer be made again) for a KafkaException in a transaction."""
    err = exc.args[0] if exc.args else None
    if err is not None and getattr(err, "fatal", lambda: False)():
        return "fatal", True
    if err is not None and err.txn_requires_abort():
        return "abort", False
    if err is not None and err.retriable():
        return "retry", False
    return "unknown", True


class _TxnProducer:
    """A transactional producer that ends every transaction with a definite or unknown outcome."""

    def __init__(self, spec: WorkerSpec) -> None:
        import confluent_kafka as ck

        self.ck, self.spec = ck, spec
        self.producer = None

    def ensure(self) -> None:
        while self.producer is None:
            p = self.ck.Producer(_config(self.spec, **{"transactional.id": self.spec.transactional_id,
                                                        "transaction.timeout.ms": TXN_TIMEOUT_MS,
                                                        "message.timeout.ms": TXN_TIMEOUT_MS, "linger.ms": 2}))
            try:
                p.init_transactions(CALL_TIMEOUT_S * 3)
                self.producer = p
            except self.ck.KafkaException:
                time.sleep(0.5)

    def run(self, sends, abort: bool, before_commit=None) -> tuple[str, list]:
        """Begin, send, (``before_commit(producer)``), commit or abort. Returns (type, sends)."""
        ck, p = self.ck, self.producer
        self.commit_time = None
        results: dict = {}
        cb = _delivered(results)
        topic_partition = [(tp.rsplit("/", 1)[0], int(tp.rsplit("/", 1)[1])) for tp, _ in sends]
        try:
            p.begin_transaction()
            for (topic, partition), (_, v) in zip(topic_partition, sends):
                p.produce(topic, value=str(v).encode(), partition=partition, on_delivery=cb)
            if before_commit is not None:
                before_commit(p)
            if abort:
                # The records reach the log (acknowledged, with offsets) before the abort: an
                # abort of queued records only purges them in the client, testing nothing.
                p.flush(CALL_TIMEOUT_S)
                p.abort_transaction(CALL_TIMEOUT_S)
                return "fail", _send_results(sends, results)[0]
            self.commit_time = time.time_ns()
            for attempt in range(3):
                try:
                    p.commit_transaction(CALL_TIMEOUT_S)
                    return "ok", _send_results(sends, results)[0]
                except ck.KafkaException as exc:
                    kind, _ = _txn_error(exc)
                    if kind != "retry":
                        raise
            self.producer = None  # the commit's outcome is unknown; a new producer fences this one
            return "info", _send_results(sends, results)[0]
        except ck.KafkaException as exc:
            kind, remake = _txn_error(exc)
            out = _send_results(sends, results)[0]
            if kind == "abort":
                try:
                    p.abort_transaction(CALL_TIMEOUT_S)
                    return "fail", out
                except ck.KafkaException:
                    pass
            # Fenced, fatal or unanswered: the transaction may or may not have committed.
            self.producer = None
            return "info", out
        except BufferError:
            self.producer = None
            return "info", _send_results(sends, results)[0]


def _records(msgs, hist_value: list) -> None:
    for m in msgs:
        if m.error() is None and m.value() is not None:
            try:
                hist_value.append(["poll", _pname(m.topic(), m.partition()), m.offset(), int(m.value())])
            except ValueError:
                hist_value.append(["poll", _pname(m.topic(), m.partition()), m.offset(), -1])


def run_txn(spec: WorkerSpec, hist: History, stop: Stop) -> None:
    import confluent_kafka as ck

    rng, values = random.Random(spec.seed), _Values(spec.process)
    consumer = ck.Consumer(_config(spec, **{"group.id": f"{spec.transactional_id}-reader", "enable.auto.commit": False,
                                            "isolation.level": "read_committed", "auto.offset.reset": "latest"}))
    parts = [ck.TopicPartition(spec.topic, i, ck.OFFSET_END) for i in range(spec.partitions)]
    consumer.assign(parts)
    hist.op("ok", "assign", [_pname(spec.topic, i) for i in range(spec.partitions)])
    txn = _TxnProducer(spec)
    while not stop.requested:
        txn.ensure()
        polls: list = []
        _records(consumer.consume(200, 0.05), polls)
        sends = [(_pname(spec.topic, rng.randrange(spec.partitions)), values.next()) for _ in range(rng.randint(1, 4))]
        abort = rng.random() < spec.abort_ratio
        hist.op("invoke", "txn", polls + [["send", tp, v] for tp, v in sends], id=spec.transactional_id)
        outcome, out = txn.run(sends, abort)
        extra = {"abort": True} if abort and outcome == "fail" else {}
        if txn.commit_time is not None:
            extra["commit_time"] = txn.commit_time
        hist.op(outcome, "txn", polls + out, id=spec.transactional_id, **extra)
        time.sleep(spec.pace_s)
    consumer.close()


def run_ctp(spec: WorkerSpec, hist: History, stop: Stop) -> None:
    import confluent_kafka as ck

    values = _Values(spec.process)
    state = {"assigned": []}

    def on_assign(c, partitions):
        state["assigned"] = list(partitions)
        hist.op("ok", "assign", [_pname(tp.topic, tp.partition) for tp in partitions])

    consumer = ck.Consumer(_config(spec, **{"group.id": spec.group, "enable.auto.commit": False,
                                            "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                                            "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}))
    consumer.subscribe([spec.topic], on_assign=on_assign)
    txn = _TxnProducer(spec)
    while not stop.requested:
        txn.ensure()
        msgs = [m for m in consumer.consume(100, 0.2) if m.error() is None]
        if not msgs:
            continue
        polls: list = []
        _records(msgs, polls)
        sends = [(_pname(spec.out_topic, m.partition() % spec.partitions), values.next()) for m in msgs]
        hist.op("invoke", "txn", polls + [["send", tp, v] for tp, v in sends], id=spec.transactional_id,
                group=spec.group)

        def offsets(p):
            p.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                          consumer.consumer_group_metadata(), CALL_TIMEOUT_S)

        outcome, out = txn.run(sends, False, before_commit=offsets)
        extra = {"commit_time": txn.commit_time} if txn.commit_time is not None else {}
        hist.op(outcome, "txn", polls + out, id=spec.transactional_id, group=spec.group, **extra)
        if outcome != "ok":
            time.sleep(0.1)  # e.g. a member the group expired: the next poll rejoins
            # Not committed (or unknown): read again from the group's committed offsets, in a
            # new session (the checker's monotonic rule applies within one). An unknown outcome
            # first gets a new producer: its InitProducerId completes or aborts the transaction
            # in doubt, so the offsets read next are the ones it left (else a commit landing
            # after the read would make this worker process those records twice).
            txn.ensure()
            try:
                committed = consumer.committed(consumer.assignment(), 10)
                for tp in committed:
                    consumer.seek(ck.TopicPartition(tp.topic, tp.partition,
                                                    tp.offset if tp.offset >= 0 else ck.OFFSET_BEGINNING))
                hist.op("ok", "assign", [_pname(tp.topic, tp.partition) for tp in committed])
            except ck.KafkaException:
                consumer.close()
                return  # the runner starts a new incarnation
    consumer.close()


def run_group(spec: WorkerSpec, hist: History, stop: Stop) -> None:
    import confluent_kafka as ck

    def on_assign(c, partitions):
        hist.op("ok", "assign", [_pname(tp.topic, tp.partition) for tp in partitions])

    consumer = ck.Consumer(_config(spec, **{"group.id": spec.group, "isolation.level": "read_committed",
                                            "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                                            "heartbeat.interval.ms": 1000}))
    consumer.subscribe([spec.topic], on_assign=on_assign)
    _consume_loop(consumer, hist, stop)
    consumer.close()


def run_reader(spec: WorkerSpec, hist: History, stop: Stop) -> None:
    import confluent_kafka as ck

    consumer = ck.Consumer(_config(spec, **{"group.id": f"chaos-reader-{spec.process}", "enable.auto.commit": False,
                                            "isolation.level": "read_committed"}))
    consumer.assign([ck.TopicPartition(spec.topic, i, ck.OFFSET_BEGINNING) for i in range(spec.partitions)])
    hist.op("ok", "assign", [_pname(spec.topic, i) for i in range(spec.partitions)])
    _consume_loop(consumer, hist, stop)
    consumer.close()


def _consume_loop(consumer, hist: History, stop: Stop) -> None:
    while not stop.requested:
        polls: list = []
        _records(consumer.consume(500, 0.2), polls)
        if polls:
            hist.op("ok", "poll", polls)


def run_final(spec: WorkerSpec, hist: History, stop: Stop) -> None:
    """Read every partition of ``topic`` (and ``out_topic``) from the beginning to its end offset,
    or until the deadline (an open transaction may hold the last stable offset back)."""
    import confluent_kafka as ck

    topics = [t for t in (spec.topic, spec.out_topic) if t]
    consumer = ck.Consumer(_config(spec, **{"group.id": f"chaos-final-{spec.process}", "enable.auto.commit": False,
                                            "isolation.level": "read_committed"}))
    tps = [ck.TopicPartition(t, i) for t in topics for i in range(spec.partitions)]
    deadline = time.monotonic() + spec.final_deadline_s
    ends = {}
    for tp in tps:
        while True:
            try:
                ends[_pname(tp.topic, tp.partition)] = consumer.get_watermark_offsets(tp, 10)[1]
                break
            except ck.KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    consumer.assign([ck.TopicPartition(t.topic, t.partition, ck.OFFSET_BEGINNING) for t in tps])
    hist.op("ok", "assign", sorted(ends), final=True, end_offsets=ends)
    reached = {tp: 0 for tp in ends}
    while time.monotonic() < deadline and not stop.requested:
        polls: list = []
        _records(consumer.consume(1000, 0.2), polls)
        if polls:
            hist.op("ok", "poll", polls)
        for t in consumer.position([ck.TopicPartition(x.topic, x.partition) for x in tps]):
            if t.offset >= 0:
                reached[_pname(t.topic, t.partition)] = t.offset
        if all(reached[tp] >= end for tp, end in ends.items()):
            break
    hist.op("ok", "final-done", reached)
    consumer.close()


def _share_kind(value: int, count: int, final: bool) -> str:
    """The acknowledgement a share consumer gives a delivery: from the value, so a history says why."""
    if final or value < 0:
        return "accept"
    if value % 10 == 3 and count == 1:
        return "release"
    return "reject" if value % 10 == 7 else "accept"


# Per-partition errors of an acknowledgement that say it was not applied; any other is unknown.
_ACK_REFUSED = ("INVALID_RECORD_STATE",)


def _share_step(ck, consumer, hist: History, final: bool, timeout_s: float) -> int:
    """One poll, its deliveries written, each acknowledged, the acknowledgements committed and
    their outcome per partition written. Returns how many records were delivered."""
    kinds = {"accept": ck.AcknowledgeType.ACCEPT, "release": ck.AcknowledgeType.RELEASE,
             "reject": ck.AcknowledgeType.REJECT}
    since = time.time_ns()
    msgs = [m for m in (consumer.poll(timeout_s) or []) if m.error() is None]
    if not msgs:
        return 0
    deliveries, acks = [], []
    for m in msgs:
        try:
            v = int(m.value())
        except (TypeError, ValueError):
            v = -1
        count = m.delivery_count()
        part = _pname(m.topic(), m.partition())
        deliveries.append(["deliver", part, m.offset(), v, count])
        acks.append(["ack", part, m.offset(), v, _share_kind(v, count, final), count])
    hist.op("ok", "share-poll", deliveries, since=since)
    hist.op("invoke", "share-ack", acks)
    for m, a in zip(msgs, acks):
        consumer.acknowledge(m, kinds[a[4]])
    try:
        result = consumer.commit_sync(CALL_TIMEOUT_S) or {}
    except ck.KafkaException:
        hist.op("info", "share-ack", [a + ["info"] for a in acks])
        return len(msgs)
    outcome = {}
    for tp, err in result.items():
        err = err if err is not None else getattr(tp, "error", None)
        if err is None:
            outcome[_pname(tp.topic, tp.partition)] = "ok"
        else:
            e = err.args[0] if isinstance(err, Exception) and err.args else err
            name = e.name() if hasattr(e, "name") else str(e)
            outcome[_pname(tp.topic, tp.partition)] = "fail" if name in _ACK_REFUSED else "info"
    done = [a + [outcome.get(a[1], "info")] for a in acks]
    kinds_seen = {a[-1] for a in done}
    hist.op(kinds_seen.pop() if len(kinds_seen) == 1 else "info", "share-ack", done)
    return len(msgs)


def _share_consumer(spec: WorkerSpec):
    import confluent_kafka as ck

    consumer = ck.ShareConsumer(_config(spec, **{"group.id": spec.group, "share.acknowledgement.mode": "explicit"}))
    consumer.subscribe([spec.topic])
    return ck, consumer


def run_share(spec: WorkerSpec, hist: History, stop: Stop) -> None:
    """A share-group member (explicit acknowledgement): every delivery ACCEPTed, but a value
    ending in 3 RELEASEd on its first delivery and one ending in 7 REJECTed."""
    ck, consumer = _share_consumer(spec)
    while not stop.requested:
        _share_step(ck, consumer, hist, False, 0.5)
    consumer.close()


SHARE_QUIET_S = 5.0


def run_share_final(spec: WorkerSpec, hist: History, stop: Stop) -> None:
    """The share group's last member, after the faults healed: ACCEPT whatever is left until
    nothing arrives for ``SHARE_QUIET_S``, and not before ``not_before_ns`` (a member that died
    holds its partitions until its session times out); ``share-final-done`` says whether it got
    that far."""
    ck, consumer = _share_consumer(spec)
    deadline = time.monotonic() + spec.final_deadline_s + max(spec.not_before_ns - time.time_ns(), 0) / 1e9
    last = time.monotonic()
    drained = False
    while time.monotonic() < deadline and not stop.requested:
        if _share_step(ck, consumer, hist, True, 0.5):
            last = time.monotonic()
        elif time.monotonic() - last >= SHARE_QUIET_S and time.time_ns() >= spec.not_before_ns:
            drained = True
            break
    hist.op("ok", "share-final-done", {"drained": drained, "quiet_s": SHARE_QUIET_S})
    consumer.close()


ROLES = {"producer": run_producer, "txn": run_txn, "ctp": run_ctp, "group": run_group, "reader": run_reader,
         "final": run_final, "share": run_share, "share-final": run_share_final}


def main(argv: list[str]) -> int:
    spec = WorkerSpec(**json.loads(open(argv[0]).read() if not argv[0].startswith("{") else argv[0]))
    stop = Stop()
    hist = History(spec.history, spec.process)
    _watchdog(hist, OP_TIMEOUT_S)
    ROLES[spec.role](spec, hist, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
