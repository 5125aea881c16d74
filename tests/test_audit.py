"""The exactly-once auditor: the pure matching logic (fast), then ``oncelog audit`` against a real
broker with confluent-kafka producers planting each anomaly."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import confluent_kafka as ck
import pytest

from oncelog.audit import AuditError, AuditResult, SourceMatcher, audit

from .helpers import create_topic

CORE_KEYS = {"input_records", "output_records", "lost", "duplicated", "aborted_reads", "phantom"}


def ref(topic: str, partition: int, offset: int) -> bytes:
    return f"{topic}:{partition}:{offset}".encode()


def clean_matcher(n: int = 10, start: int = 0) -> SourceMatcher:
    """Input ``in:0`` with committed offsets [start, start + n), declared, one output each."""
    m = SourceMatcher()
    m.declare_input("in", 0, start, start + n)
    offsets = list(range(start, start + n))
    m.mark_inputs("in", 0, offsets, committed=False)
    m.mark_inputs("in", 0, offsets, committed=True)
    return m


# -- matching logic, no I/O -------------------------------------------------------------------------

def test_clean_pair_is_ok():
    m = clean_matcher(10)
    m.add_sources([ref("in", 0, o) for o in range(10)])
    r = m.result()
    assert r.ok
    assert (r.input_records, r.output_records, r.lost, r.duplicated, r.aborted_reads, r.phantom) == (10, 10, 0, 0, 0, 0)
    assert set(r.to_dict()) >= CORE_KEYS | {"ok"} and r.to_dict()["ok"] is True


def test_lost_records_are_counted_and_named():
    m = clean_matcher(10)
    m.add_sources([ref("in", 0, o) for o in range(10) if o not in (3, 7)])
    r = m.result()
    assert (r.lost, r.duplicated, r.aborted_reads, r.phantom) == (2, 0, 0, 0)
    assert not r.ok
    assert r.examples["lost"] == ["in:0:3", "in:0:7"]


def test_duplicates_count_every_extra_output():
    m = clean_matcher(5)
    # offset 1 three times (2 extra), offset 4 twice (1 extra); strings are accepted as well as bytes
    m.add_sources([ref("in", 0, o) for o in range(5)] + [ref("in", 0, 1), ref("in", 0, 1), "in:0:4"],
                  lambda i: f"out:0:{i}")
    r = m.result()
    assert (r.output_records, r.lost, r.duplicated, r.aborted_reads, r.phantom) == (8, 0, 3, 0, 0)
    assert r.examples["duplicated"][0] == "out:0:5 -> in:0:1"


def test_output_of_an_aborted_input_is_an_aborted_read():
    m = SourceMatcher()
    m.declare_input("in", 0, 0, 6)
    m.mark_inputs("in", 0, [0, 1, 2, 3, 4], committed=False)  # offset 5: the ABORT marker
    m.mark_inputs("in", 0, [0, 1], committed=True)            # 2..4 were in an aborted transaction
    m.add_sources([ref("in", 0, 0), ref("in", 0, 1), ref("in", 0, 3), ref("in", 0, 3)])
    r = m.result()
    assert (r.input_records, r.aborted_inputs) == (2, 3)
    assert (r.lost, r.duplicated, r.aborted_reads, r.phantom) == (0, 0, 2, 0)  # every such output counts


def test_phantoms_of_every_kind():
    m = clean_matcher(4)
    m.mark_inputs("in", 1, [0], committed=True)  # an undeclared partition, offset 0 only
    sources = [ref("in", 0, o) for o in range(4)] + [
        ref("in", 0, 4),      # past the end of the partition
        ref("in", 0, -1),     # before its start
        ref("in", 9, 0),      # unknown partition
        ref("nope", 0, 0),    # unknown topic
        b"in:0:x",            # malformed offset
        b"garbage",           # no separators at all
        b"in:p:1",            # malformed partition
        None,                 # no header
    ]
    m.add_sources(sources)
    r = m.result()
    assert (r.lost, r.duplicated, r.aborted_reads) == (1, 0, 0)  # in:1:0 has no output
    assert r.phantom == 8 and r.missing_header == 4
    assert len(r.examples["phantom"]) == 5  # bounded


def test_an_offset_without_a_record_is_phantom():
    # A transaction marker (or a compacted gap) takes an offset but is no record.
    m = SourceMatcher()
    m.declare_input("in", 0, 0, 4)
    m.mark_inputs("in", 0, [0, 1, 2], committed=True)  # offset 3: the COMMIT marker
    m.add_sources([ref("in", 0, 0), ref("in", 0, 1), ref("in", 0, 2), ref("in", 0, 3)])
    r = m.result()
    assert (r.input_records, r.phantom, r.lost) == (3, 1, 0)


def test_offsets_not_starting_at_zero():
    m = clean_matcher(1000, start=1_000_000)  # log start offset moved by retention or DeleteRecords
    assert m.memory_bytes() == 1000  # sized by the offset span, not by the absolute offsets
    m.add_sources([ref("in", 0, o) for o in range(1_000_000, 1_001_000) if o != 1_000_500] + [ref("in", 0, 999_999)])
    r = m.result()
    assert (r.input_records, r.lost, r.phantom) == (1000, 1, 1)
    assert r.examples["lost"] == ["in:0:1000500"]


def test_undeclared_partitions_grow_both_ways():
    m = SourceMatcher()
    m.mark_inputs("in", 0, [500, 501], committed=True)
    m.mark_inputs("in", 0, list(range(502, 10_000)), committed=True)  # grows upward
    m.mark_inputs("in", 0, [7, 3], committed=True)                    # grows downward, unsorted
    assert m.memory_bytes() < 4 * 10_000
    m.add_sources([ref("in", 0, o) for o in [3, 7, *range(500, 10_000)]] + [ref("in", 0, 4), ref("in", 0, 10_000)])
    r = m.result()
    assert (r.input_records, r.lost, r.duplicated, r.phantom) == (2 + 9500, 0, 0, 2)


def test_declared_range_refuses_marks_outside_it():
    m = SourceMatcher()
    m.declare_input("in", 0, 10, 20)
    with pytest.raises(ValueError):
        m.mark_inputs("in", 0, [20], committed=True)
    with pytest.raises(ValueError):
        m.mark_inputs("in", 0, [9], committed=False)
    with pytest.raises(ValueError):
        m.declare_input("in", 0, 0, 5)  # would drop the state marked so far


def test_outputs_past_the_last_stable_offset_are_pending():
    m = SourceMatcher()
    m.declare_input("in", 0, 0, 3, 5)  # LSO 3, high watermark 5: an open transaction from 3
    m.mark_inputs("in", 0, [0, 1, 2], committed=True)
    m.add_sources([ref("in", 0, 0), ref("in", 0, 1), ref("in", 0, 2), ref("in", 0, 3), ref("in", 0, 4),
                   ref("in", 0, 5)])
    r = m.result()
    assert (r.pending, r.phantom, r.lost) == (2, 1, 0) and not r.ok


def test_inputs_are_sealed_by_the_first_output():
    m = clean_matcher(2)
    m.add_source(ref("in", 0, 0))
    with pytest.raises(RuntimeError):
        m.mark_inputs("in", 0, [1], committed=True)


def test_many_duplicates_of_one_input_are_counted_exactly():
    m = clean_matcher(1)
    m.add_sources([ref("in", 0, 0)] * 1000)  # more than a byte could count
    assert m.result().duplicated == 999


def test_result_ok_and_dict():
    r = AuditResult(input_records=3, output_records=3)
    assert r.ok
    for name in AuditResult.ANOMALIES:
        assert not AuditResult(**{name: 1}).ok
    d = AuditResult(phantom=2, missing_header=1).to_dict()
    assert d["phantom"] == 2 and d["missing_header"] == 1 and d["ok"] is False
    json.dumps(d)


# -- against a real broker ----------------------------------------------------------------------

def run_audit(bootstrap: str, inputs: list[str], outputs: list[str], *extra: str):
    args = [sys.executable, "-m", "oncelog", "audit", "--bootstrap", bootstrap, "--json", "--timeout", "10"]
    args += [a for t in inputs for a in ("--input", t)] + [a for t in outputs for a in ("--output", t)]
    proc = subprocess.run([*args, *extra], capture_output=True, text=True, timeout=120)
    doc = json.loads(proc.stdout) if proc.stdout.strip() else None
    return proc, doc


def produce_inputs(bootstrap: str, topic: str, partitions: int, n: int, txn_id: str) -> dict[int, list[int]]:
    """n committed records over ``partitions`` in two transactions; {partition: offsets}."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    p.init_transactions(30)
    offsets: dict[int, list[int]] = {q: [] for q in range(partitions)}

    def delivered(err, msg):
        assert err is None, err
        offsets[msg.partition()].append(msg.offset())

    for half in (range(0, n // 2), range(n // 2, n)):
        p.begin_transaction()
        for i in half:
            p.produce(topic, key=str(i).encode(), value=b"v%d" % i, partition=i % partitions, on_delivery=delivered)
        p.commit_transaction(30)
    return {q: sorted(o) for q, o in offsets.items()}


def produce_outputs(bootstrap: str, topic: str, refs: list[tuple[int, bytes | None]], txn_id: str) -> None:
    """One transaction writing an output per (partition, source header value); None: no header."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for partition, source in refs:
        p.produce(topic, value=b"out", partition=partition,
                  headers=None if source is None else [("oncelog.source", source)])
    p.commit_transaction(30)


def setup_pair(bootstrap: str, tag: str, n: int = 200) -> tuple[str, str, list[tuple[str, int, int]]]:
    inp, out = f"in-{tag}", f"out-{tag}"
    create_topic(bootstrap, inp, 3)
    create_topic(bootstrap, out, 2)
    offsets = produce_inputs(bootstrap, inp, 3, n, f"{tag}-in")
    records = [(inp, q, o) for q, offs in offsets.items() for o in offs]
    assert len(records) == n
    return inp, out, records


def test_cli_clean_pair_passes(broker):
    inp, out, records = setup_pair(broker.bootstrap, "clean")
    # Committed in two transactions: each input partition holds two COMMIT markers between records.
    produce_outputs(broker.bootstrap, out, [(i % 2, ref(*r)) for i, r in enumerate(records)], "clean-out")
    proc, doc = run_audit(broker.bootstrap, [inp], [out])
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert set(doc) >= CORE_KEYS
    assert doc["input_records"] == 200 and doc["output_records"] == 200
    assert all(doc[k] == 0 for k in ("lost", "duplicated", "aborted_reads", "phantom"))
    assert doc["open_transactions"] == [] and doc["aborted_inputs"] == 0
    # The table for people says the same.
    table = subprocess.run([sys.executable, "-m", "oncelog", "audit", "--bootstrap-server", broker.bootstrap,
                            "--input", inp, "--output", out], capture_output=True, text=True, timeout=120)
    assert table.returncode == 0 and "exactly once" in table.stdout and "NOT" not in table.stdout


def test_cli_finds_each_planted_anomaly(broker):
    bs = broker.bootstrap
    inp, out, records = setup_pair(bs, "planted")
    lost, duplicated = records[5], records[17]
    refs = [ref(*r) for r in records if r != lost] + [ref(*duplicated)]
    # An input transaction that is aborted after its records are written (flush first: librdkafka
    # purges unsent records on abort, which would plant nothing).
    p = ck.Producer({"bootstrap.servers": bs, "transactional.id": "planted-aborter"})
    p.init_transactions(30)
    p.begin_transaction()
    aborted: list[tuple[str, int, int]] = []
    p.produce(inp, value=b"doomed", partition=1,
              on_delivery=lambda err, msg: aborted.append((msg.topic(), msg.partition(), msg.offset())))
    p.flush(30)
    p.abort_transaction(30)
    assert len(aborted) == 1
    refs.append(ref(*aborted[0]))
    refs.append(ref(inp, 0, 10_000))  # phantom: an offset the input never had
    produce_outputs(bs, out, [(i % 2, r) for i, r in enumerate(refs)], "planted-out")

    proc, doc = run_audit(bs, [inp], [out])
    assert proc.returncode == 1, proc.stderr + proc.stdout
    assert (doc["lost"], doc["duplicated"], doc["aborted_reads"], doc["phantom"]) == (1, 1, 1, 1)
    assert doc["input_records"] == 200 and doc["output_records"] == 200 - 1 + 1 + 1 + 1
    assert doc["aborted_inputs"] == 1 and doc["ok"] is False
    assert doc["examples"]["lost"] == ["%s:%d:%d" % lost]
    assert doc["examples"]["aborted_reads"][0].endswith("-> %s:%d:%d" % aborted[0])


@pytest.mark.parametrize("kind", ["lost", "duplicated", "aborted_reads", "phantom"])
def test_api_finds_one_anomaly_alone(broker, kind):
    """Each anomaly on its own makes the audit fail, and only that count moves."""
    bs = broker.bootstrap
    inp, out, records = setup_pair(bs, kind, n=30)
    refs: list[bytes | None] = [ref(*r) for r in records]
    if kind == "lost":
        refs.pop(11)
    elif kind == "duplicated":
        refs.append(refs[3])
    elif kind == "aborted_reads":
        p = ck.Producer({"bootstrap.servers": bs, "transactional.id": f"{kind}-aborter"})
        p.init_transactions(30)
        p.begin_transaction()
        got: list = []
        p.produce(inp, value=b"doomed", partition=2, on_delivery=lambda e, m: got.append(m.offset()))
        p.flush(30)
        p.abort_transaction(30)
        refs.append(ref(inp, 2, got[0]))
    else:
        refs.append(None)  # an output that names no input
    produce_outputs(bs, out, [(0, r) for r in refs], f"{kind}-out")
    result = audit(bs, inp, [out], timeout=10)
    counts = {k: getattr(result, k) for k in AuditResult.ANOMALIES}
    assert counts == {k: int(k == kind) for k in AuditResult.ANOMALIES}
    assert not result.ok


def test_partition_of_only_aborted_records_and_several_topics(broker):
    """An input partition holding only an aborted transaction (records and marker, nothing a
    read_committed consumer returns) is read to its end, not waited on; two input topics feed two
    output topics; a custom header name."""
    bs = broker.bootstrap
    for t in ("a-in", "b-in", "a-out", "b-out"):
        create_topic(bs, t, 2)
    p = ck.Producer({"bootstrap.servers": bs, "transactional.id": "multi-in"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(4):
        p.produce("a-in", value=b"x", partition=1)  # partition 1 of a-in: aborted only
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce("a-in" if i % 2 else "b-in", value=b"x", partition=0)
    p.commit_transaction(30)
    q = ck.Producer({"bootstrap.servers": bs})  # non-transactional outputs are committed too
    for topic, n in (("a-in", 5), ("b-in", 5)):
        for o in range(n):
            q.produce("a-out" if topic == "a-in" else "b-out", value=b"y", partition=o % 2,
                      headers=[("src", f"{topic}:0:{o}".encode())])
    q.flush(30)
    result = audit(bs, ["a-in", "b-in"], "a-out,b-out", header="src", timeout=10)
    assert result.ok, result.to_dict()
    assert (result.input_records, result.output_records, result.aborted_inputs) == (10, 10, 4)
    # With the default header name, every output names no input.
    other = audit(bs, "a-in,b-in", ["a-out", "b-out"], timeout=10)
    assert (other.phantom, other.missing_header, other.lost) == (10, 10, 10)


def test_open_transactions_are_reported_not_judged(broker):
    """An input record in an open transaction is neither lost nor aborted, and an output naming it is
    pending; an output in an open transaction is invisible at read_committed (not a duplicate)."""
    bs = broker.bootstrap
    inp, out, records = setup_pair(bs, "open", n=10)
    refs = [ref(*r) for r in records]
    p = ck.Producer({"bootstrap.servers": bs, "transactional.id": "open-hanger"})
    p.init_transactions(30)
    p.begin_transaction()
    got: list = []
    p.produce(inp, value=b"undecided", partition=0, on_delivery=lambda e, m: got.append(m.offset()))
    p.flush(30)  # left open while the audit runs
    refs.append(ref(inp, 0, got[0]))
    produce_outputs(bs, out, [(0, r) for r in refs], "open-out")
    q = ck.Producer({"bootstrap.servers": bs, "transactional.id": "open-out-hanger"})
    q.init_transactions(30)
    q.begin_transaction()
    q.produce(out, value=b"dup", partition=1, headers=[("oncelog.source", refs[0])])
    q.flush(30)
    result = audit(bs, inp, out, timeout=10, wait_stable=1)
    assert sorted(result.open_transactions) == [f"{inp}:0", f"{out}:1"]
    assert result.pending == 1 and result.ok, result.to_dict()
    assert (result.input_records, result.output_records) == (10, 11)
    p.abort_transaction(30)
    q.abort_transaction(30)


def test_audit_waits_for_open_transactions_to_finish(broker):
    bs = broker.bootstrap
    inp, out, records = setup_pair(bs, "wait", n=10)
    p = ck.Producer({"bootstrap.servers": bs, "transactional.id": "wait-late"})
    p.init_transactions(30)
    p.begin_transaction()
    got: list = []
    p.produce(inp, value=b"late", partition=1, on_delivery=lambda e, m: got.append(m.offset()))
    p.flush(30)
    produce_outputs(bs, out, [(0, ref(*r)) for r in records] + [(1, ref(inp, 1, got[0]))], "wait-out")
    committer = threading.Timer(1.5, lambda: p.commit_transaction(30))
    committer.start()
    try:
        result = audit(bs, inp, out, timeout=10, wait_stable=20)
    finally:
        committer.join()
    assert result.open_transactions == [] and result.pending == 0
    assert result.ok and (result.input_records, result.output_records) == (11, 11)
    assert result.seconds >= 1.0  # it did wait


def test_cli_errors_exit_2(broker):
    create_topic(broker.bootstrap, "exists", 1)
    proc, _ = run_audit(broker.bootstrap, ["no-such-topic"], ["exists"])
    assert proc.returncode == 2 and "unknown topic 'no-such-topic'" in proc.stderr
    with pytest.raises(AuditError, match="cannot reach"):
        audit("127.0.0.1:1", "x", "y", timeout=2)
    proc = subprocess.run([sys.executable, "-m", "oncelog", "audit", "--input", "x"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "--output" in proc.stderr
