"""The bench's Apache Kafka targets (bench/kafka.py): ``python -m bench`` starts a
one-node Kafka (full JIT) beside oncelog, runs a short cell of each load generator on both — Kafka's
own ProducerPerformance/ConsumerPerformance (java-*), the protocol-level transactional producer
(wire-txn-100ms, which must retry Kafka's CONCURRENT_TRANSACTIONS as the Java client does) — and
reports, per cell, records acknowledged and read back and the broker's CPU per record, and the
"oncelog / Apache Kafka" ratio rows of the pair oncelog-never/kafka. Invariants: every
acknowledged record is read back (at both isolation levels for the transactional cells), the
broker CPU per record is a positive figure for both brokers, the Kafka node is gone after the run.
The target names and pairing are checked without a broker."""

from __future__ import annotations

import json
import os

import pytest

from bench.modes import MODES, SUITE_MODES, Target

from ..helpers import need_apache_kafka

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]


def test_kafka_target_names_and_pairs():
    from bench.kafka import FLUSH1, PAIRS, broker_config

    plain, flush1 = Target.parse("kafka"), Target.parse("kafka+flush1")
    assert (plain.kind, plain.fsync, plain.label) == ("kafka", None, "Apache Kafka")
    assert (flush1.kind, flush1.fsync, flush1.label) == ("kafka", "flush1", "Apache Kafka flush.messages=1")
    assert PAIRS == {"oncelog-never": "kafka", "oncelog-always": "kafka+flush1",
                     "oncelog-never:nodes2": "kafka", "oncelog-always:nodes2": "kafka+flush1"}
    assert broker_config(True, 3) == {"num.partitions": "3", **FLUSH1}
    assert "log.flush.interval.messages" not in broker_config(False, 3)
    assert {"acks1", "acksall", "idempotent", "txn-100ms", "wire-txn-100ms", "java-txn-100ms"} <= set(SUITE_MODES["kafka"])
    assert MODES["java-txn-100ms"].isolations == ("read_committed", "read_uncommitted")


def test_bench_runs_kafka_beside_oncelog(tmp_path):
    from oncelog.tools.apache_kafka import fetch

    from bench.cli import main

    need_apache_kafka("Apache Kafka", fetch)
    out = tmp_path / "bench.json"
    rc = main(["--targets", "oncelog-never,kafka", "--modes", "java-acks1,wire-txn-100ms", "--sizes", "1k",
               "--duration", "1", "--rounds", "1", "--warmup", "0", "--consume-seconds", "0", "-p", "1",
               "--work-dir", str(tmp_path / "work"), "--json", str(out)])
    doc = json.loads(out.read_text())
    errors = [(c["target"], c["mode"], c["errors"]) for c in doc["cells"] if c["errors"]]
    assert rc == 0 and not errors, errors
    assert "Apache Kafka 4" in doc["machine"]["broker_settings"]["kafka"]
    cells = {(c["target"], c["mode"]): c for c in doc["cells"]}
    assert len(cells) == 4
    for (target, mode), c in cells.items():
        p = c["produce"]
        assert p["records"] > 0 and p["broker_cpu_us_per_record"] > 0, (target, mode, p)
        written = p.get("written", p["records"])
        reads = [c["consume"], *(c["reads"] or {}).values()]
        assert len(reads) == (2 if mode == "wire-txn-100ms" else 1)
        for r in reads:
            assert r["records"] == written and r["broker_cpu_us_per_record"] > 0, (target, mode, r)
    rows = [r for r in doc["kafka_ratios"] if r["kind"] == "throughput"]
    assert {(r["mode"], r["metric"]) for r in rows} == {
        ("java-acks1", "produce"), ("java-acks1", "consume"), ("wire-txn-100ms", "produce"),
        ("wire-txn-100ms", "consume read_committed"), ("wire-txn-100ms", "consume read_uncommitted")}
    for r in rows:
        assert r["ratio"] > 0 and r["cpu_ratio"] > 0 and r["oncelog"] == "oncelog-never" and r["kafka"] == "kafka"
    assert doc["machine"]["broker_exit_codes"]["kafka"] is not None  # stopped with the run
    assert not os.path.exists(tmp_path / "work" / "kafka" / "node-1" / "data")  # topics' data removed
