"""What a benchmark run measures: producer modes, brokers under test, and the headline ratios.

A *cell* is one (broker target, record size, mode) combination. Modes are plain data: a
librdkafka producer config, plus optional transaction pacing and the consumer isolation level,
so a new mode (idempotent, transactional, ...) is one more entry in :data:`MODES`.
"""

from __future__ import annotations

import os

from dataclasses import dataclass, field

from .security import PROTOCOLS


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
    also_read_as: tuple[str, ...] = ()  # further isolation levels the cell is read back with
    # Set for modes driven by the protocol-level producer (bench/wireload.py) instead of
    # librdkafka: {"acks": 1|-1, "max_in_flight": n, "idempotent": bool}; ``producer`` is unused.
    wire: dict | None = None
    # Set for modes driven by Kafka's own perf tools (ProducerPerformance / ConsumerPerformance,
    # bench/kafka.py): the Java producer's properties; ``producer`` and ``wire`` are unused.
    java: dict | None = None

    @property
    def isolations(self) -> tuple[str, ...]:
        """Every read-back pass of a cell of this mode; the first is what the results table shows."""
        return (self.isolation, *self.also_read_as)

    def to_json(self) -> dict:
        return {"name": self.name, "label": self.label, "producer": dict(self.producer), "wire": self.wire,
                "java": self.java,
                "txn_commit_ms": self.txn_commit_ms, "isolation": self.isolation,
                "also_read_as": list(self.also_read_as), "description": self.description}


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
    # Diagnostic: librdkafka 2.16's broker thread uses ~70% of a core with idempotence and 5
    # requests in flight (~18% with 1), on any broker; on 2 cores that CPU is taken from the
    # broker. With one in flight, the difference to at-least-once is the broker's own cost.
    Mode("idempotent-mif1", "idempotent mif1", {"enable.idempotence": True,
                                                "max.in.flight.requests.per.connection": 1},
         description="diagnostic: enable.idempotence=true with max.in.flight=1 (the at-least-once pipelining)"),
    # Transactional producers (a transactional.id per client process) committing every 10 ms,
    # 100 ms and 1 s. Their cells are read back twice, read_committed and read_uncommitted, so
    # the cost of read_committed is measured on the same data.
    *(Mode(f"txn-{label}", f"txn {label}", {"enable.idempotence": True}, txn_commit_ms=ms,
           isolation="read_committed", also_read_as=("read_uncommitted",),
           description=f"transactional producer committing every {label}; read back read_committed "
                       f"and read_uncommitted")
      for ms, label in [(10, "10ms"), (100, "100ms"), (1000, "1s")]),
]}
# The same delivery modes sent by the protocol-level producer (bench/wireload.py): identical,
# pre-encoded batches in every mode and up to 5 requests really in flight, so the ratios between
# them are the broker's own cost of each mode. librdkafka's idempotent producer cannot show that:
# it keeps one request in flight per partition and spins while a batch waits (see wireload.py).
WIRE_MODES = [
    Mode("wire-at-most-once", "at-most-once (wire)", wire={"acks": 1, "max_in_flight": 5},
         description="protocol-level producer: acks=1, 5 requests in flight"),
    Mode("wire-at-least-once", "at-least-once (wire)", wire={"acks": -1, "max_in_flight": 1},
         description="protocol-level producer: acks=all, 1 request in flight (in order)"),
    Mode("wire-acksall-mif5", "acks=all mif5 (wire)", wire={"acks": -1, "max_in_flight": 5},
         description="protocol-level producer: acks=all, 5 in flight, no producer id (not ordered "
                     "on retry): idempotent minus the idempotence"),
    Mode("wire-idempotent", "idempotent (wire)", wire={"acks": -1, "max_in_flight": 5, "idempotent": True},
         description="protocol-level producer: producer id and sequences, acks=all, 5 in flight"),
    *(Mode(f"wire-txn-{label}", f"txn {label} (wire)", wire={"acks": -1, "max_in_flight": 5, "idempotent": True},
           txn_commit_ms=ms, isolation="read_committed", also_read_as=("read_uncommitted",),
           description=f"protocol-level transactional producer (transaction version 1) committing every "
                       f"{label}; read back read_committed and read_uncommitted")
      for ms, label in [(10, "10ms"), (100, "100ms"), (1000, "1s")]),
]
MODES.update({m.name: m for m in WIRE_MODES})
# The same again with Apache Kafka's own perf tools (org.apache.kafka.tools.ProducerPerformance and
# ConsumerPerformance from the cached kafka-tools jar; bench/kafka.py), i.e. the Java client with
# its defaults (batch.size 16 KB, linger.ms 5) except what the mode names: what a Kafka user
# measures with kafka-producer-perf-test / kafka-consumer-perf-test.
JAVA_MODES = [
    Mode("java-acks1", "acks=1 (Java)", java={"acks": "1", "enable.idempotence": "false"},
         description="kafka-producer-perf-test: acks=1, not idempotent"),
    Mode("java-acksall", "acks=all (Java)", java={"acks": "all", "enable.idempotence": "false"},
         description="kafka-producer-perf-test: acks=all, not idempotent"),
    Mode("java-idempotent", "idempotent (Java)", java={"acks": "all", "enable.idempotence": "true"},
         description="kafka-producer-perf-test: enable.idempotence=true (the Java client's default)"),
    Mode("java-txn-100ms", "txn 100ms (Java)", java={"acks": "all", "enable.idempotence": "true"}, txn_commit_ms=100,
         isolation="read_committed", also_read_as=("read_uncommitted",),
         description="kafka-producer-perf-test --transaction-duration-ms 100 (the Java client: transaction "
                     "version 2 where the broker offers it); read back by kafka-consumer-perf-test at both "
                     "isolation levels"),
]
MODES.update({m.name: m for m in JAVA_MODES})
MODE_ALIASES = {"transactional": "txn-100ms"}  # the name this mode had before the txn suite
DEFAULT_MODES = ["acks1", "acksall"]


@dataclass(frozen=True)
class Target:
    """A broker under test: ``oncelog-<fsync>`` (never, always, interval:MS), ``tansu``, or
    Apache Kafka: ``kafka`` (one KRaft node, Kafka's default of no fsync per acknowledgement) and
    ``kafka+flush1`` (``log.flush.interval.messages=1``: an fsync before every acknowledgement),
    see bench/kafka.py.

    ``oncelog-<fsync>@<dir>`` runs the broker from another source tree (e.g. a ``git worktree``
    of an older commit), so that two versions are measured side by side in one run.
    ``oncelog-<fsync>+<protocol>`` (``+ssl``, ``+sasl_plaintext``, ``+sasl_ssl``; before any
    ``@<dir>``) serves its clients on a listener of that security protocol (bench/security.py);
    its ratio over the same target without ``+<protocol>`` is reported when both are run.
    ``oncelog-<fsync>:nodes<N>`` (right after the fsync policy) runs ``oncelog serve --nodes N``:
    a cluster of N node processes on this machine, node k pinned to core k-1 by its supervisor
    when there are as many cores (docs/multicore.md); its clients route by Metadata."""

    name: str
    kind: str  # "oncelog" | "tansu" | "kafka"
    fsync: str | None = None
    tree: str | None = None  # source tree of the broker; None: this one
    security: str = "plaintext"  # a key of bench.security.PROTOCOLS
    nodes: int = 1  # oncelog serve --nodes

    @classmethod
    def parse(cls, text: str) -> "Target":
        if text == "tansu":
            return cls("tansu", "tansu")
        if text in ("kafka", "kafka+flush1"):  # Apache Kafka, one node (bench/kafka.py)
            return cls(text, "kafka", "flush1" if text.endswith("+flush1") else None)
        if text.startswith("oncelog-"):
            spec, _, tree = text.partition("@")
            spec, plus, security = spec.partition("+")
            if plus and security not in PROTOCOLS:
                raise ValueError(f"target {text!r}: unknown security protocol {security!r}; "
                                 f"use one of {', '.join(PROTOCOLS)}")
            fsync = spec.removeprefix("oncelog-")
            nodes = 1
            head, colon, tail = fsync.rpartition(":")
            if colon and tail.startswith("nodes"):
                if not tail[5:].isdigit() or not 1 <= int(tail[5:]) <= 256:
                    raise ValueError(f"target {text!r}: :nodes<N> takes N in 1..256")
                fsync, nodes = head, int(tail[5:])
            if tree and not os.path.isdir(os.path.join(tree, "oncelog")):
                raise ValueError(f"target {text!r}: {tree!r} holds no oncelog package")
            if fsync in ("never", "always") or (fsync.startswith("interval:") and fsync[9:].isdigit()):
                return cls(text, "oncelog", fsync, os.path.abspath(tree) if tree else None, security or "plaintext",
                           nodes)
        raise ValueError(f"unknown target {text!r}: use tansu, kafka, kafka+flush1, oncelog-never, oncelog-always "
                         f"or oncelog-interval:MS, optionally :nodes<N>, optionally +ssl/+sasl_plaintext/+sasl_ssl, "
                         f"optionally @<source tree>")

    @property
    def label(self) -> str:
        if self.kind == "tansu":
            return "Tansu (memory)"
        if self.kind == "kafka":
            return "Apache Kafka flush.messages=1" if self.fsync == "flush1" else "Apache Kafka"
        return (f"oncelog fsync {self.fsync}" + (f" {self.nodes} nodes" if self.nodes > 1 else "")
                + (f" {PROTOCOLS[self.security]}" if self.security != "plaintext" else "")
                + (f" @{os.path.basename(self.tree)}" if self.tree else ""))

    def skips(self, mode: "Mode") -> str | None:
        """Why this target does not run ``mode``'s cells (None: it does)."""
        if self.kind == "tansu" and mode.java is not None:
            # seen with 0.6.0: its log says UnexpectedEof "failed to fill whole buffer" for every
            # connection of the Java client, which reconnects until its delivery timeout
            return "Tansu 0.6.0 drops every connection of Kafka's Java client (kafka-clients 4.4)"
        if self.kind == "kafka" and self.security != "plaintext":
            return "the Apache Kafka targets run over PLAINTEXT only"
        return None

    @property
    def plaintext_name(self) -> str:
        """The same target over PLAINTEXT (its own name when it is)."""
        if self.security == "plaintext":
            return self.name
        spec, at, tree = self.name.partition("@")
        return spec.partition("+")[0] + at + tree


DEFAULT_TARGETS = ["oncelog-never", "oncelog-always", "tansu"]


@dataclass(frozen=True)
class Comparison:
    """A ratio row between brokers: ``metric`` of ``numerator`` over ``denominator`` for one
    record size and the cells of ``modes`` (pooled when several; every mode of that size when
    empty). ``goal`` is the target ratio. A row is shown only if every mode it names was run."""

    label: str
    metric: str  # "produce" | "consume"
    size: int
    numerator: str
    denominator: str
    modes: tuple[str, ...] = ()
    goal: float | None = None


PRODUCE_SUITE_MODES = ("acks1", "acksall")
COMPARISONS = [
    Comparison("produce 1 KB acks=all, fsync never", "produce", 1024, "oncelog-never", "tansu", ("acksall",), 1.0),
    Comparison("produce 1 KB acks=all, fsync always", "produce", 1024, "oncelog-always", "tansu", ("acksall",), 0.8),
    # the consume rows pool the acks=1 and acks=all topics (as before the EOS suites existed)
    Comparison("consume 1 KB (fsync never broker)", "consume", 1024, "oncelog-never", "tansu", PRODUCE_SUITE_MODES, 1.0),
    Comparison("consume 1 KB (fsync always broker)", "consume", 1024, "oncelog-always", "tansu", PRODUCE_SUITE_MODES, 1.0),
    # for information: the EOS modes across brokers (no target)
    *(Comparison(f"produce 1 KB {label}, fsync {fsync}", "produce", 1024, f"oncelog-{fsync}", "tansu", (mode,))
      for mode, label in [("idempotent", "idempotent"), ("txn-100ms", "txn 100ms")]
      for fsync in ("never", "always")),
]


# The cost of a security protocol: every target ``X+<protocol>`` over ``X`` (the same broker over
# PLAINTEXT), per record size and mode, produce and consume. TLS in Python's ssl should
# cost less than 30%, so the rows of the TLS protocols have a goal of 0.7.
SECURITY_GOAL = {"ssl": 0.7, "sasl_ssl": 0.7}


def security_comparisons(targets: list[Target], matrix: list[tuple[int, "Mode"]]) -> list[Comparison]:
    names = {t.name for t in targets}
    out = []
    for t in targets:
        if t.security == "plaintext" or t.plaintext_name not in names:
            continue
        for metric in ("produce", "consume"):
            for size, mode in matrix:
                size_text = f"{size // 1024} KB" if size % 1024 == 0 else f"{size} B"
                out.append(Comparison(f"{PROTOCOLS[t.security]} / PLAINTEXT {metric} {size_text} {mode.label} "
                                      f"({t.plaintext_name})", metric, size, t.name, t.plaintext_name,
                                      (mode.name,), SECURITY_GOAL.get(t.security)))
    return out


# ------------------------------------------------------------------------------------- suites
#
# A suite is what one issue asks to measure. produce: the original broker-vs-broker run (sizes and
# modes from --sizes/--modes). eos and txn add 1 KB cells of their modes to the
# same interleaved matrix (at-least-once is shared); groups runs after the cells.

SUITES = ["produce", "eos", "groups", "txn", "kafka"]
# ``all`` is every suite but kafka (which needs Java 17 and the cached Apache Kafka jars)
ALL_SUITES = ["produce", "eos", "groups", "txn"]
EOS_SIZE = 1024
SUITE_MODES = {
    "eos": ["at-most-once", "at-least-once", "idempotent", "idempotent-mif1",
            "wire-at-most-once", "wire-at-least-once", "wire-acksall-mif5", "wire-idempotent"],
    "txn": ["at-least-once", "txn-10ms", "txn-100ms", "txn-1s",
            "wire-at-least-once", "wire-idempotent", "wire-txn-10ms", "wire-txn-100ms", "wire-txn-1s"],
    # oncelog beside Apache Kafka (targets kafka, kafka+flush1): acks=1, acks=all,
    # idempotent and transactional (100 ms) with each of the three load generators; the txn
    # cells are read back at both isolation levels; the suite also runs the EndTxn probe and the
    # groups suite (rebalance time, offset commits)
    "kafka": ["acks1", "acksall", "idempotent", "txn-100ms",
              "wire-at-most-once", "wire-acksall-mif5", "wire-idempotent", "wire-txn-100ms",
              "java-acks1", "java-acksall", "java-idempotent", "java-txn-100ms"],
}


@dataclass(frozen=True)
class ModeRatio:
    """A ratio row within one broker: ``numerator`` mode over ``denominator`` mode (1 KB
    records/s). For ``metric="consume"`` both are read-back passes of the *same* cells (of mode
    ``numerator``) with the isolation levels ``isolations = (numerator's, denominator's)``."""

    suite: str
    label: str
    numerator: str
    denominator: str
    metric: str = "produce"
    isolations: tuple[str, str] | None = None
    goal: float | None = None
    reference: str = ""


_RC = ("read_committed", "read_uncommitted")
MODE_RATIOS = [
    # The targets, with the protocol-level producer: the broker's own cost of each mode.
    ModeRatio("eos", "idempotent / at-least-once (wire)", "wire-idempotent", "wire-at-least-once", goal=0.97,
              reference="Kafka 0.11 (Java client): ~0.97"),
    ModeRatio("eos", "idempotent / acks=all mif5 (wire)", "wire-idempotent", "wire-acksall-mif5",
              reference="idempotence alone, same pipelining"),
    ModeRatio("eos", "idempotent / at-most-once (wire)", "wire-idempotent", "wire-at-most-once",
              reference="Kafka 0.11: ~0.8"),
    ModeRatio("txn", "txn 100ms / at-least-once (wire)", "wire-txn-100ms", "wire-at-least-once", goal=0.97,
              reference="Kafka 0.11 (Java client): ~0.97"),
    ModeRatio("txn", "txn 10ms / at-least-once (wire)", "wire-txn-10ms", "wire-at-least-once"),
    ModeRatio("txn", "txn 1s / at-least-once (wire)", "wire-txn-1s", "wire-at-least-once"),
    ModeRatio("txn", "txn 100ms / idempotent (wire)", "wire-txn-100ms", "wire-idempotent",
              reference="the cost of transactions over idempotence"),
    *(ModeRatio("txn", f"consume read_committed / read_uncommitted, txn {label} data (wire)", mode, mode,
                metric="consume", isolations=_RC, goal=0.97, reference="Kafka 0.11: no measurable cost")
      for mode, label in [("wire-txn-100ms", "100ms")]),
    # The same with librdkafka (confluent-kafka), the reference client.
    ModeRatio("eos", "idempotent / at-least-once", "idempotent", "at-least-once", goal=0.97,
              reference="librdkafka: 1 request in flight per partition when idempotent"),
    ModeRatio("eos", "idempotent / at-most-once", "idempotent", "at-most-once",
              reference="Kafka 0.11 idempotent/txn: ~0.8"),
    ModeRatio("eos", "at-least-once / at-most-once", "at-least-once", "at-most-once"),
    ModeRatio("eos", "idempotent mif1 / at-least-once", "idempotent-mif1", "at-least-once",
              reference="diagnostic: the broker's own idempotence cost"),
    ModeRatio("txn", "txn 100ms / at-least-once", "txn-100ms", "at-least-once", goal=0.97,
              reference="librdkafka: 1 request in flight per partition when idempotent"),
    ModeRatio("txn", "txn 10ms / at-least-once", "txn-10ms", "at-least-once"),
    ModeRatio("txn", "txn 1s / at-least-once", "txn-1s", "at-least-once"),
    ModeRatio("txn", "txn 100ms / at-most-once", "txn-100ms", "at-most-once", reference="Kafka 0.11: ~0.8"),
    ModeRatio("txn", "txn 100ms / idempotent", "txn-100ms", "idempotent",
              reference="the cost of transactions over idempotence"),
    *(ModeRatio("txn", f"consume read_committed / read_uncommitted, txn {label} data", mode, mode,
                metric="consume", isolations=_RC, goal=0.97, reference="Kafka 0.11: no measurable cost")
      for mode, label in [("txn-10ms", "10ms"), ("txn-100ms", "100ms"), ("txn-1s", "1s")]),
]
