"""What a benchmark run measures: producer modes, brokers under test, and the headline ratios.

A *cell* is one (broker target, record size, mode) combination. Modes are plain data: a
librdkafka producer config, plus optional transaction pacing and the consumer isolation level,
so a new mode (idempotent, transactional, ...) is one more entry in :data:`MODES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Mode:
    """A producer delivery mode.

    name:          short key used on the command line (``--modes``) and in the JSON.
    label:         what the results table shows.
    producer:      librdkafka config merged over the bench's base producer config.
    txn_commit_ms: if set, the producer is transactional (``transactional.id`` per worker) and
                   commits every this many milliseconds.
    isolation:     ``isolation.level`` of the consumers that read the cell back.
    """

    name: str
    label: str
    producer: dict = field(default_factory=dict)
    txn_commit_ms: int | None = None
    isolation: str = "read_uncommitted"
    description: str = ""

    def to_json(self) -> dict:
        return {"name": self.name, "label": self.label, "producer": dict(self.producer),
                "txn_commit_ms": self.txn_commit_ms, "isolation": self.isolation,
                "description": self.description}


# Every mode starts from this. librdkafka's default queue (100,000 messages) lets a saturating
# producer build a queue that takes ~0.3-1 s to drain, so delivery latency would mostly measure
# that queue; 10,000 messages kept throughput the same or better on every broker here (measured
# on the 2-core box: 1 KB acks=all at 100k vs 10k vs 2k messages) and makes p50/p99 mean
# something. Override with -X queue.buffering.max.messages=...
BASE_PRODUCER = {"linger.ms": 5, "queue.buffering.max.messages": 10_000}

# Keys are what --modes takes. DEFAULT_MODES are the ones a plain run measures; the others are
# ready for when the broker serves InitProducerId / transactions (against a broker that does not,
# their cells fail and are reported as such, the run goes on).
MODES: dict[str, Mode] = {m.name: m for m in [
    Mode("acks1", "acks=1", {"acks": "1"},
         description="leader ack, no fsync wait; librdkafka defaults otherwise"),
    Mode("acksall", "acks=all", {"acks": "all"},
         description="acks=all: with --fsync always oncelog answers after a group-commit fsync"),
    # The EOS-REFERENCE comparison points (Kafka 0.11, KIP-98):
    Mode("at-most-once", "at-most-once", {"acks": "1", "max.in.flight.requests.per.connection": 5,
                                          "retries": 0},
         description="acks=1, max.in.flight=5, no retries"),
    Mode("at-least-once", "at-least-once", {"acks": "all", "max.in.flight.requests.per.connection": 1},
         description="acks=all, max.in.flight=1 (in order)"),
    Mode("idempotent", "idempotent", {"enable.idempotence": True},
         description="enable.idempotence=true (acks=all, max.in.flight=5)"),
    Mode("transactional", "txn 100ms", {"enable.idempotence": True}, txn_commit_ms=100,
         isolation="read_committed",
         description="transactional producer committing every 100 ms, read_committed consumers"),
]}
DEFAULT_MODES = ["acks1", "acksall"]


@dataclass(frozen=True)
class Target:
    """A broker under test: ``oncelog-<fsync>`` (never, always, interval:MS) or ``tansu``."""

    name: str
    kind: str  # "oncelog" | "tansu"
    fsync: str | None = None

    @classmethod
    def parse(cls, text: str) -> "Target":
        if text == "tansu":
            return cls("tansu", "tansu")
        if text.startswith("oncelog-"):
            fsync = text.removeprefix("oncelog-")
            if fsync in ("never", "always") or (fsync.startswith("interval:") and fsync[9:].isdigit()):
                return cls(text, "oncelog", fsync)
        raise ValueError(f"unknown target {text!r}: use tansu, oncelog-never, oncelog-always or "
                         f"oncelog-interval:MS")

    @property
    def label(self) -> str:
        return "Tansu (memory)" if self.kind == "tansu" else f"oncelog fsync {self.fsync}"


DEFAULT_TARGETS = ["oncelog-never", "oncelog-always", "tansu"]


@dataclass(frozen=True)
class Comparison:
    """A ratio row: ``metric`` of ``numerator`` over ``denominator`` for one record size (and,
    for produce, one mode; consume pools every mode of that size). ``goal`` is the target ratio."""

    label: str
    metric: str  # "produce" | "consume"
    size: int
    numerator: str
    denominator: str
    mode: str | None = None
    goal: float | None = None


COMPARISONS = [
    Comparison("produce 1 KB acks=all, fsync never", "produce", 1024, "oncelog-never", "tansu", "acksall", 1.0),
    Comparison("produce 1 KB acks=all, fsync always", "produce", 1024, "oncelog-always", "tansu", "acksall", 0.8),
    Comparison("consume 1 KB (fsync never broker)", "consume", 1024, "oncelog-never", "tansu", None, 1.0),
    Comparison("consume 1 KB (fsync always broker)", "consume", 1024, "oncelog-always", "tansu", None, 1.0),
]
