"""The "orders" event stream and the rules the pipeline applies to it.

Events are JSON objects ``{"order_id", "customer", "amount", "ts", "items"}`` keyed by customer:
``amount`` is a decimal number with two places, ``ts`` the event time in epoch milliseconds.
Event times follow a simulated business clock (``STEP_MS`` per event from ``T0_MS``), not the
wall clock, so a run is reproducible from its seed and the watermark behaves the same on a fast
and a slow machine. Around that clock:

* ~1% of events are invalid (malformed JSON, no customer, an amount <= 0): the job flags them;
* ~2% arrive late but within the watermark delay (``LATE_OK_MAX_MS`` behind): counted;
* ~0.5% arrive far beyond it (``TOO_LATE_MIN_MS`` behind and more): Spark's watermark drops
  them from the event-time windows. They appear only once the stream is well under way (see
  :class:`WindowRule`).

The generator writes transactions of ``txn_size`` events with a transactional confluent-kafka
producer; one transaction in eight (the 2nd, the 10th, ...) is aborted on purpose: records no
read_committed reader may ever see. A transaction that fails because the broker went away is
aborted and written again (its first attempt is aborted input too). It can write in ``waves``:
the demo releases the next wave after each crash, so every restarted driver has fresh input to
work on while the next crash comes, and the last run has some too.

The plain-Python rules below (:func:`parse_order`, :func:`amount_class`, :func:`window_start`,
:class:`WindowRule`) are the ground truth's copy of what the Spark job computes; they are applied
to the input read back at read_committed, never to what the generator meant to write.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

T0_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the simulated clock's start
STEP_MS = 50  # simulated time between consecutive events
WINDOW_MS = 5 * 60_000  # tumbling event-time windows
WATERMARK_DELAY_MS = 10 * 60_000  # withWatermark("event_time", "10 minutes")
LATE_OK_MIN_MS, LATE_OK_MAX_MS = 30_000, 5 * 60_000  # late, and still within the watermark
TOO_LATE_MIN_MS, TOO_LATE_MAX_MS = 90 * 60_000, 150 * 60_000  # far beyond the watermark

SMALL_BELOW, MEDIUM_BELOW = Decimal("20"), Decimal("200")


def amount_class(amount: Decimal) -> str:
    return "small" if amount < SMALL_BELOW else "medium" if amount < MEDIUM_BELOW else "large"


def window_start(ts_ms: int) -> int:
    return ts_ms - ts_ms % WINDOW_MS


@dataclass(frozen=True)
class Order:
    order_id: str
    customer: str
    amount: Decimal
    ts: int


def parse_order(value: bytes | None) -> Order | None:
    """The job's validation in Python: None for an invalid event (malformed JSON, a missing
    field, an amount that is not > 0)."""
    if value is None:
        return None
    try:
        d = json.loads(value, parse_float=Decimal, parse_int=Decimal)
    except (ValueError, InvalidOperation):
        return None
    if not isinstance(d, dict):
        return None
    oid, cust, amount, ts = d.get("order_id"), d.get("customer"), d.get("amount"), d.get("ts")
    if not isinstance(oid, str) or not isinstance(cust, str) or not isinstance(amount, Decimal):
        return None
    if not isinstance(ts, Decimal) or ts != ts.to_integral_value():
        return None
    if not amount > 0:
        return None
    return Order(oid, cust, amount.quantize(Decimal("0.01")), int(ts))


@dataclass(frozen=True)
class WindowRule:
    """Which valid events the windowed aggregation counts, decided from the input alone.

    Spark drops an event from a window aggregation when its window's end is at or before the
    watermark in force for its micro-batch: the largest event time of the *earlier* batches minus
    the delay. Where exactly the watermark stands depends on how the stream was cut into
    micro-batches (restarts change that), so the rule keeps a margin on both sides and refuses
    to guess in between. With ``lateness`` = (largest event time before the event in its
    partition) - (its event time):

    * ``lateness <= keep_max_ms``: counted whatever the batching (the watermark never passes it);
    * ``lateness >= drop_min_ms`` and the partition's stream already spans ``warmup_ms`` of event
      time: dropped whatever the batching (the watermark has passed its window's end);
    * anything else: ambiguous, counted in ``WindowTruth.ambiguous`` (the generator makes none).

    ``batch_span_ms``: the most event time one micro-batch can cover (``maxOffsetsPerTrigger`` x
    ``STEP_MS``); the watermark may trail the stream by two batches.
    """

    batch_span_ms: int
    skew_ms: int = 2 * 60_000  # partitions of one micro-batch may be this far apart in event time

    @property
    def keep_max_ms(self) -> int:
        return WATERMARK_DELAY_MS - self.skew_ms

    @property
    def drop_min_ms(self) -> int:
        return WATERMARK_DELAY_MS + WINDOW_MS + 2 * self.batch_span_ms + self.skew_ms

    @property
    def warmup_ms(self) -> int:
        return 3 * self.batch_span_ms + self.skew_ms


def max_offsets_per_trigger(records: int) -> int:
    """Micro-batch size cap: a tenth of the stream, between 1,000 and 20,000 rows."""
    return max(1000, min(20_000, records // 10))


# ---------------------------------------------------------------------------------------------
# The generator


@dataclass
class GeneratorStats:
    produced: int = 0  # events sent, in any transaction (committed or not)
    committed: int = 0  # events in committed transactions
    aborted: int = 0  # events in transactions aborted on purpose
    failed: int = 0  # events in transactions aborted because a send or commit failed (then rewritten)
    transactions: int = 0
    aborted_transactions: int = 0
    retried_transactions: int = 0
    invalid: int = 0  # among committed events
    late_ok: int = 0
    too_late: int = 0
    done: bool = False
    error: str | None = None
    errors: list[str] = field(default_factory=list)  # client errors survived (broker restarts)


@dataclass(frozen=True)
class GeneratorConfig:
    records: int = 200_000  # events produced in all, aborted transactions included
    partitions: int = 4
    customers: int = 400
    txn_size: int = 500
    abort_fraction: float = 0.125
    invalid_fraction: float = 0.01
    late_ok_fraction: float = 0.02
    too_late_fraction: float = 0.005
    rate: float | None = None  # events/s; None: as fast as the producer goes
    waves: int = 1  # write in this many waves; wave k > 0 starts when Generator.release() is called
    seed: int = 1
    transactional_id: str = "oncelog-demo-generator"


def quiet_logger():
    """A logger for librdkafka's own log lines: while the broker is down on purpose it logs every
    refused connection; the errors that matter reach us as exceptions and delivery errors."""
    import logging

    log = logging.getLogger("oncelog.pipeline.librdkafka")
    log.propagate = False
    log.setLevel(logging.CRITICAL)
    return log


def client_conf(bootstrap: str, conf: dict | None = None) -> dict:
    """librdkafka settings for a client of the pipeline's cluster: ``conf`` (security, from
    :func:`oncelog.client.security.librdkafka_config`) and the bootstrap servers."""
    return {**(conf or {}), "bootstrap.servers": bootstrap}


def customer_name(i: int) -> str:
    return f"c-{i:04d}"


class Generator:
    """Builds the events of a seeded run and writes them (``run``, usually in a thread)."""

    def __init__(self, bootstrap: str, topic: str, config: GeneratorConfig, *, stop: threading.Event | None = None,
                 on_progress=None, conf: dict | None = None) -> None:
        self.bootstrap = bootstrap
        self.conf = conf  # more librdkafka settings (security) for the producer
        self.topic = topic
        self.cfg = config
        self.stats = GeneratorStats()
        self.stop = stop or threading.Event()
        self.on_progress = on_progress
        self.rule = WindowRule(max_offsets_per_trigger(config.records) * STEP_MS)
        rng = random.Random(config.seed)
        # Zipf-like popularity: a few big customers, a long tail.
        self._weights = [1 / (k + 1) ** 0.9 for k in range(config.customers)]
        self._cum = list(_accumulate(self._weights))
        self._rng = rng
        self._producer = None
        self._gate = threading.Semaphore(0)
        self.wave = 0  # the wave being written (or waited for)
        self.waiting = False  # blocked until the next wave is released

    def release(self, n: int = 1) -> None:
        """Let the next wave (or ``n`` waves) start."""
        for _ in range(n):
            self._gate.release()

    def wave_starts(self) -> list[int]:
        """Event index where each wave after the first starts (on a transaction boundary)."""
        cfg = self.cfg
        per_wave = math.ceil(cfg.records / max(1, cfg.waves) / cfg.txn_size) * cfg.txn_size
        return [k * per_wave for k in range(1, cfg.waves) if k * per_wave < cfg.records]

    # -- events ---------------------------------------------------------------------------------
    def events(self):
        """Yield ``(index, key, value, kind)`` for every event of the run, in order."""
        cfg, rng = self.cfg, self._rng
        warmup_events = math.ceil(self.rule.warmup_ms / STEP_MS) + cfg.txn_size
        for i in range(cfg.records):
            c = _pick(self._cum, rng.random())
            cust = customer_name(c)
            ts = T0_MS + i * STEP_MS
            kind = "ok"
            r = rng.random()
            if r < cfg.late_ok_fraction:
                ts -= rng.randint(LATE_OK_MIN_MS, LATE_OK_MAX_MS)
                kind = "late-ok"
            elif r < cfg.late_ok_fraction + cfg.too_late_fraction and i >= warmup_events:
                ts -= rng.randint(TOO_LATE_MIN_MS, TOO_LATE_MAX_MS)
                kind = "too-late"
            cents = max(1, int(math.exp(rng.gauss(3.3, 1.1)) * 100))
            items = 1 + int(rng.expovariate(0.7))
            oid = f"o-{i:07d}"
            amount = f"{cents // 100}.{cents % 100:02d}"
            if rng.random() < cfg.invalid_fraction:
                kind = "invalid"
                bad = rng.randrange(4)
                if bad == 0:
                    value = f'{{"order_id": "{oid}", "customer": "{cust}", "amount": {amount}, "ts": '
                elif bad == 1:
                    value = f'{{"order_id": "{oid}", "customer": null, "amount": {amount}, "ts": {ts}, "items": {items}}}'
                elif bad == 2:
                    value = f'{{"order_id": "{oid}", "customer": "{cust}", "amount": -{amount}, "ts": {ts}, "items": {items}}}'
                else:
                    value = f'{{"order_id": "{oid}", "customer": "{cust}", "amount": 0.00, "ts": {ts}, "items": {items}}}'
            else:
                value = (f'{{"order_id": "{oid}", "customer": "{cust}", "amount": {amount}, "ts": {ts}, '
                         f'"items": {items}}}')
            yield i, cust.encode(), value.encode(), kind

    # -- writing --------------------------------------------------------------------------------
    def _new_producer(self):
        import confluent_kafka as ck

        if self._producer is not None:
            try:
                self._producer.flush(0)
            except Exception:
                pass
        p = ck.Producer({**client_conf(self.bootstrap, self.conf), "transactional.id": self.cfg.transactional_id,
                         "linger.ms": 10, "batch.num.messages": 10_000, "compression.type": "lz4",
                         "transaction.timeout.ms": 60_000, "message.timeout.ms": 60_000,
                         "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500, "logger": quiet_logger()})
        deadline = time.monotonic() + 120
        while True:
            try:
                p.init_transactions(30)
                break
            except Exception as exc:  # broker down: wait for it
                if time.monotonic() > deadline or self.stop.is_set():
                    raise
                self.stats.errors.append(f"init_transactions: {exc}")
                time.sleep(0.5)
        self._producer = p
        return p

    def _write_txn(self, batch, abort: bool) -> None:
        """One transaction; on a client error abort it and write the same events again."""
        from confluent_kafka import KafkaException

        st = self.stats
        for _attempt in range(50):
            p = self._producer or self._new_producer()
            try:
                p.begin_transaction()
                for _i, key, value, _kind in batch:
                    while True:
                        try:
                            p.produce(self.topic, key=key, value=value)
                            break
                        except BufferError:
                            p.poll(0.05)
                    p.poll(0)
                st.produced += len(batch)
                if abort:
                    # Send the records first: an abort before they leave the client would purge
                    # them from its queue, and the log would hold no aborted records at all.
                    if p.flush(60) != 0:
                        raise RuntimeError("could not send an aborted transaction's records in 60s")
                    p.abort_transaction(60)
                    st.aborted += len(batch)
                    st.aborted_transactions += 1
                else:
                    self._commit(p)
                    st.committed += len(batch)
                    for _i, _k, _v, kind in batch:
                        if kind == "invalid":
                            st.invalid += 1
                        elif kind == "late-ok":
                            st.late_ok += 1
                        elif kind == "too-late":
                            st.too_late += 1
                st.transactions += 1
                return
            except KafkaException as exc:
                err = exc.args[0]
                st.errors.append(str(err))
                st.retried_transactions += 1
                st.failed += len(batch)
                try:
                    if err.txn_requires_abort():
                        p.abort_transaction(60)
                    else:
                        self._producer = None  # fatal, or unknown state: a new producer fences the old
                except KafkaException as exc2:
                    st.errors.append(f"abort: {exc2.args[0]}")
                    self._producer = None
                time.sleep(0.2)
        raise RuntimeError(f"a transaction failed 50 times; last errors: {st.errors[-3:]}")

    def _commit(self, p) -> None:
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + 120
        while True:
            try:
                p.commit_transaction(30)
                return
            except KafkaException as exc:
                err = exc.args[0]
                if err.retriable() and time.monotonic() < deadline:
                    self.stats.errors.append(f"commit (retrying): {err}")
                    time.sleep(0.2)
                    continue
                raise

    def run(self) -> GeneratorStats:
        cfg = self.cfg
        starts = self.wave_starts()
        wave_t0, wave_produced = time.monotonic(), 0
        try:
            self._new_producer()
            batch = []
            every = max(2, round(1 / cfg.abort_fraction)) if cfg.abort_fraction > 0 else 0
            txn = 0
            for ev in self.events():
                if starts and ev[0] == starts[0] and not batch:
                    starts.pop(0)
                    self.wave += 1
                    self.waiting = True
                    while not self._gate.acquire(timeout=0.25):
                        if self.stop.is_set():
                            return self.stats
                    self.waiting = False
                    wave_t0, wave_produced = time.monotonic(), self.stats.produced
                batch.append(ev)
                if len(batch) == cfg.txn_size or ev[0] == cfg.records - 1:
                    if self.stop.is_set():
                        break
                    # One transaction in `every` is aborted, from the second on: even a short run has some.
                    abort = bool(every) and txn % every == 1
                    txn += 1
                    self._write_txn(batch, abort)
                    batch = []
                    if self.on_progress:
                        self.on_progress(self.stats)
                    if cfg.rate:
                        ahead = wave_t0 + (self.stats.produced - wave_produced) / cfg.rate - time.monotonic()
                        if ahead > 0:
                            self.stop.wait(ahead)
        except Exception as exc:
            self.stats.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self.stats.done = True
            if self.on_progress:
                self.on_progress(self.stats)
        return self.stats


def _accumulate(weights):
    total = 0.0
    s = sum(weights)
    for w in weights:
        total += w / s
        yield total


def _pick(cum: list[float], r: float) -> int:
    import bisect

    return min(bisect.bisect_left(cum, r), len(cum) - 1)


def create_topics(bootstrap: str, topics: dict[str, int], timeout: float = 30.0, *, replication_factor: int = 1,
                  conf: dict | None = None) -> None:
    """Create topics (name -> partitions) unless they exist; ``replication_factor`` -1 takes the
    cluster's default."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({**client_conf(bootstrap, conf), "logger": quiet_logger()})
    existing = set(admin.list_topics(timeout=timeout).topics)
    new = [NewTopic(t, n, replication_factor) for t, n in topics.items() if t not in existing]
    if new:
        for t, fut in admin.create_topics(new).items():
            try:
                fut.result(timeout)
            except Exception as exc:
                if "ALREADY_EXISTS" not in str(exc).upper().replace(" ", "_"):
                    raise
