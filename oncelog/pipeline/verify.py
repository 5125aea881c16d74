"""The end-of-run proof.

1. The per-event output against the input, by the exactly-once auditor
   (:func:`oncelog.audit.audit`): no committed input lost, none duplicated, nothing from an
   aborted transaction read, no output without its input.
2. The aggregates against a ground truth recomputed here from the input as any downstream
   consumer sees it (confluent-kafka at read_committed), with the job's rules in plain Python
   (:mod:`.events`): valid orders and their amount per customer and event-time window, without
   the late events Spark's watermark drops (:class:`~.events.WindowRule`). The aggregate topic is
   read at read_committed; the last value per key must equal the expected value, for every key,
   and no key may be there that should not. Each aggregate record carries the micro-batch that
   wrote it: the same (key, batch) twice is a duplicated write (a replayed batch written again).
"""

from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal

from .events import WindowRule, client_conf, parse_order, quiet_logger, window_start


def read_committed(bootstrap: str, topic: str, *, isolation: str = "read_committed", timeout: float = 60.0,
                   conf: dict | None = None):
    """Yield every record of ``topic`` readable at ``isolation``, partition by partition in offset
    order, up to the end (the last stable offset at read_committed) taken when the read starts.
    A partition is done when the consumer's position reaches that end (not by counting: aborted
    records and transaction markers take offsets and are never returned)."""
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, OffsetSpec
    from confluent_kafka import IsolationLevel

    admin = AdminClient({**client_conf(bootstrap, conf), "logger": quiet_logger()})
    meta = admin.list_topics(topic, timeout=timeout).topics[topic]
    if meta.error is not None:
        raise RuntimeError(f"topic {topic}: {meta.error}")
    tps = [ck.TopicPartition(topic, p) for p in sorted(meta.partitions)]
    level = IsolationLevel.READ_COMMITTED if isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED
    futs = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, isolation_level=level, request_timeout=timeout)
    ends = {(tp.topic, tp.partition): f.result(timeout).offset for tp, f in futs.items()}
    todo = {p: e for (_t, p), e in ends.items() if e > 0}
    if not todo:
        return
    consumer = ck.Consumer({**client_conf(bootstrap, conf), "group.id": f"oncelog-verify-{uuid.uuid4().hex}",
                            "enable.auto.commit": False, "isolation.level": isolation,
                            "auto.offset.reset": "earliest", "enable.partition.eof": True, "fetch.wait.max.ms": 50,
                            "logger": quiet_logger()})
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in todo])
        last_progress = time.monotonic()
        while todo:
            msgs = consumer.consume(10_000, 0.2)
            for m in msgs:
                if m.error() is not None:
                    continue
                if m.offset() < todo.get(m.partition(), -1):
                    yield m
            if msgs:
                last_progress = time.monotonic()
            for tp in consumer.position([ck.TopicPartition(topic, p) for p in list(todo)]):
                if tp.offset >= todo[tp.partition]:
                    del todo[tp.partition]
                    consumer.pause([ck.TopicPartition(topic, tp.partition)])
            if time.monotonic() - last_progress > timeout:
                raise RuntimeError(f"reading {topic}: no progress for {timeout:.0f}s")
    finally:
        consumer.close()


@dataclass
class Truth:
    """What the aggregate must say, from the committed input."""

    committed: int = 0
    valid: int = 0
    invalid: int = 0
    totals: dict[str, tuple[int, Decimal]] = field(default_factory=dict)  # "customer|window start ms"
    customers: int = 0
    windows: int = 0
    late_kept: int = 0  # out of order (lateness > 0) and counted in its window
    late_dropped: int = 0  # beyond the watermark: in no window
    ambiguous: int = 0  # lateness in the band where the batching would decide (the generator makes none)


def totals_key(customer: str, window_start_ms: int) -> str:
    return f"{customer}|{window_start_ms}"


def ground_truth(bootstrap: str, topic: str, rule: WindowRule, timeout: float = 60.0, *,
                 conf: dict | None = None) -> Truth:
    """Per customer and event-time window: valid orders and their amount, the events Spark's
    watermark drops left out (:class:`~.events.WindowRule`)."""
    t = Truth()
    acc: dict[str, list] = defaultdict(lambda: [0, Decimal(0)])
    running_max: dict[int, int] = {}
    first: dict[int, int] = {}
    customers, windows = set(), set()
    for m in read_committed(bootstrap, topic, timeout=timeout, conf=conf):
        t.committed += 1
        o = parse_order(m.value())
        if o is None:
            t.invalid += 1
            continue
        t.valid += 1
        p = m.partition()
        prev = running_max.get(p)
        counted = True
        if prev is not None:
            lateness = prev - o.ts
            if lateness > rule.keep_max_ms:
                warmed = prev - first[p] >= rule.warmup_ms
                if lateness >= rule.drop_min_ms and warmed:
                    counted = False
                    t.late_dropped += 1
                else:
                    t.ambiguous += 1
            elif lateness > 0:
                t.late_kept += 1
        else:
            first[p] = o.ts
        running_max[p] = o.ts if prev is None else max(prev, o.ts)
        if counted:
            ws = window_start(o.ts)
            a = acc[totals_key(o.customer, ws)]
            a[0] += 1
            a[1] += o.amount
            customers.add(o.customer)
            windows.add(ws)
    t.totals = {k: (v[0], v[1]) for k, v in acc.items()}
    t.customers, t.windows = len(customers), len(windows)
    return t


@dataclass
class AggregateCheck:
    topic: str
    expected_keys: int = 0
    keys: int = 0  # distinct keys in the topic
    updates: int = 0  # records in the topic
    matching: int = 0
    wrong: int = 0  # a key whose last value differs
    missing: int = 0  # expected, never written
    unexpected: int = 0  # written, not expected
    duplicate_writes: int = 0  # the same (key, batch) more than once
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.wrong == 0 and self.missing == 0 and self.unexpected == 0

    def to_dict(self) -> dict:
        return {"topic": self.topic, "expected_keys": self.expected_keys, "keys": self.keys, "updates": self.updates,
                "matching": self.matching, "wrong": self.wrong, "missing": self.missing,
                "unexpected": self.unexpected, "duplicate_writes": self.duplicate_writes, "ok": self.ok,
                "examples": self.examples[:5]}


def check_aggregate(bootstrap: str, topic: str, expected: dict, key_of, timeout: float = 60.0, *,
                    conf: dict | None = None) -> AggregateCheck:
    """Compare the last value per key of ``topic`` (read_committed) with ``expected``
    (key -> (orders, amount)). ``key_of`` turns a record's decoded value into the expected dict's key."""
    res = AggregateCheck(topic, expected_keys=len(expected))
    last: dict = {}
    seen: set = set()
    for m in read_committed(bootstrap, topic, timeout=timeout, conf=conf):
        res.updates += 1
        d = json.loads(m.value())
        k = key_of(d)
        if (k, d.get("batch")) in seen:
            res.duplicate_writes += 1
        seen.add((k, d.get("batch")))
        last[k] = (int(d["orders"]), Decimal(d["amount"]))
    res.keys = len(last)
    for k, want in expected.items():
        got = last.get(k)
        if got is None:
            res.missing += 1
            if len(res.examples) < 5:
                res.examples.append(f"{k}: missing, expected {want[0]} orders / {want[1]}")
        elif got != want:
            res.wrong += 1
            if len(res.examples) < 5:
                res.examples.append(f"{k}: {got[0]} orders / {got[1]}, expected {want[0]} / {want[1]}")
        else:
            res.matching += 1
    for k in last.keys() - expected.keys():
        res.unexpected += 1
        if len(res.examples) < 5:
            res.examples.append(f"{k}: written ({last[k][0]} orders / {last[k][1]}), not expected")
    return res
