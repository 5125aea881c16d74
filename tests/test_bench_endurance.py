"""``python -m bench endurance`` (bench/endurance.py) small, in CI: the demo's two output paths (the
streaming sink, ``writeStream.format("oncelog")``, and the ``foreachBatch`` batch writer with
``txnAppId``/``txnVersion``) side by side for :data:`BATCHES` micro-batches on a real oncelog broker
and a real Spark driver, and the bounds of a month of micro-batches asserted after warm-up:

* transactional ids held by the broker (ListTransactions, every state) never above the pool bound
  the bench derives from the job's shape (a naming that makes new ids per micro-batch passes it
  within a few dozen batches);
* the broker's RSS, the driver's Python RSS and the checkpoints: the last window within 10% of the
  first window after warm-up (a window's peak, for the sizes on disk); the driver JVM's heap after
  a full GC within 30% (its RSS follows the heap the JVM chose to grow, not what it holds: below);
* the segments of the two compacted topics, ``__transaction_state`` and the commit log: the last
  window at most one segment per partition in use above the first. A compacted partition is cleaned
  only in closed segments and only once its dirty part reaches half of it, so its size swings by up
  to a segment between samples (a saw-tooth, BENCHMARKS.md); 10% was within that swing, and a CI run
  under load saw +16% (688 -> 733 -> 851 KB at 100/200/300 micro-batches, 11 ids) while the
  uncompacted growth would be ~+700 KB a window. Without compaction the series grows by what the
  micro-batches write, well past this bound;
* the streaming path's output audited exactly once (oncelog's auditor).

Cheap settings so that it fits in CI (a micro-batch of both queries costs ~1.5 CPU seconds here,
nearly all Spark's JVM and its Python workers, whatever the input; ~4 minutes in all on a quiet
machine): one partition per topic, no fsync, trigger 0, and what makes the bounded series reach
their level within ~100 micro-batches instead of thousands: Spark retains 10 batches of checkpoint
(not 100) and tracks 50 jobs and stages and 20 SQL executions (not 1,000), and the two compacted topics roll 64 KiB segments (not 16 MiB / 1 GiB), so
compaction runs during the test. Latencies are printed, never asserted. ``ONCELOG_SOAK=full`` runs
1,000 micro-batches (~18 minutes). Apache Kafka is the long benchmark's, not this test's: the same
micro-batches, plus Kafka's start and its broker's CPU per micro-batch, in a CI run at its budget.
"""

from __future__ import annotations

import json

import pytest

from bench import endurance

from .conftest import soak_scale

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# 200 micro-batches in windows of 50, two of them warm-up, in CI: every series measured here settles
# within ~100 (a 300-batch run in windows of 50: ids 8 from the first window, broker RSS
# 67.9 -> 70.1 MiB, heap after GC 120/140/118/124/131/116 MiB), so the last window against the first
# after warm-up is as telling as with 300 in windows of 100, for two thirds of the CPU (docs/testing.md).
BATCHES = soak_scale(1000, 200)
EVERY = soak_scale(100, 50)
WARMUP = soak_scale(1, 2)  # windows
HEAP_PROBES = soak_scale(8, 4)  # jcmd probes of the driver's heap per window: one every ~12 micro-batches
# Judged from the bench's own verdicts (the last window within --tolerance, 10%, of the first).
BOUNDED = ("txn_ids", "broker_rss_mib", "checkpoint_bytes")
# The driver, judged here, each part by what measures what it holds. Its Python process (the
# connector's driver side) by RSS, 10%. Its JVM not by RSS: a JVM grows its heap towards -Xmx under
# allocation pressure and keeps it, so RSS jumps with the machine's load, not with what the driver
# holds (a CI run under load saw 853 -> 874 -> 1,619 MiB in its last window; alone at once after, it
# passed). The JVM by its heap after a full GC instead (the least of 8 probes a window), with room
# for the live set's swing while both queries are busy: +-20% with the micro-batches in flight, 18%
# once between two windows of the long benchmark (BENCHMARKS.md) — 30%; a leak of one micro-batch's
# worth of anything exceeds it within the long benchmark's windows.
DRIVER_BOUNDS = {"driver_python_rss_mib": 0.10, "driver_heap_after_gc_mib": 0.30}
SEGMENT_BYTES = 65536  # --segment-bytes below
TXN_STATE_PARTITIONS = 50  # transaction.state.log.num.partitions (Kafka's default, oncelog's too)
COMMIT_LOG_PARTITIONS = 1  # the sink creates its commit log with one partition
# Growth found by this benchmark that is Spark's, not ours: the test fails on anything
# else and reports these as an expected failure while they grow. The commit log grew too (a day
# of COMMIT markers, delete.retention.ms): the sink keeps them an hour now, the bench 30 s here.
KNOWN_GROWTH = {
    "checkpoint_bytes": "Spark's RocksDB state store (the totals query) puts RocksDB's whole MANIFEST, which "
                        "grows by a version edit per micro-batch (Spark sets no max_manifest_file_size), into "
                        "every snapshot it zips: ~180 bytes per micro-batch without changelog checkpointing, "
                        "~17 with it (the pipeline's session turns it on)",
}
SPARK_CONF = ("spark.sql.streaming.minBatchesToRetain=10", "spark.sql.streaming.stateStore.maintenanceInterval=5s",
              "spark.ui.retainedJobs=50", "spark.ui.retainedStages=50", "spark.sql.ui.retainedExecutions=20")


def test_the_demo_output_paths_stay_bounded_over_many_micro_batches(tmp_path, capsys):
    report = tmp_path / "endurance.json"
    argv = ["--broker", "oncelog", "--batches", str(BATCHES), "--every", str(EVERY), "--warmup", str(WARMUP),
            "--heap-probes", str(HEAP_PROBES),
            "--input-partitions", "1", "--enriched-partitions", "1", "--totals-partitions", "1",
            "--fsync", "never", "--trigger-ms", "0", "--txn-every-ms", "50", "--segment-bytes", str(SEGMENT_BYTES),
            "--marker-retention-ms", "30000",
            "--stall-seconds", "180", "--max-seconds", str(BATCHES * 4), "--work-dir", str(tmp_path),
            "--report", str(report)]
    for kv in SPARK_CONF:
        argv += ["--spark-conf", kv]
    endurance.main(argv)
    printed = capsys.readouterr().out
    doc = json.loads(report.read_text())
    r = doc["results"]["oncelog"]
    assert "error" not in r, f"{r.get('error')}\n{printed}"
    # Both queries ran the micro-batches asked for, each with input, and the samples cover them.
    assert min(r["batches"].values()) >= BATCHES, r["batches"]
    windows = r["windows"]
    assert [w["batches"] for w in windows] == list(range(EVERY, BATCHES + 1, EVERY))
    for w in windows:
        assert w["enrich_input_rows"] >= EVERY and w["totals_input_rows"] > 0, w

    bound = doc["config"]["max_ids"]
    assert bound == endurance.derived_id_bound(1, 2, 3)
    after = windows[WARMUP:]
    ids = [w["txn_ids"] for w in after]
    assert max(ids) <= bound, f"transactional ids {ids} per {EVERY} micro-batches after warm-up, bound {bound}: " \
                              f"{[w['txn_ids_by_owner'] for w in after]}"
    failed = {k: r["verdicts"][k] for k in BOUNDED if not r["verdicts"][k]["ok"]}
    why = "\n".join(f"{k}: {v['verdict']} ({[w.get(k) for w in windows]})" for k, v in failed.items()) \
        + f"\ncheckpoints by part: {[w['checkpoint_bytes_by_part'] for w in windows]}"
    assert not set(failed) - set(KNOWN_GROWTH), why
    for key, tolerance in DRIVER_BOUNDS.items():
        values = [w.get(key) for w in windows]
        v = endurance.verdict(values, WARMUP, tolerance, "flat")
        # (the heap is n/a without the JDK's jcmd; every run here has it)
        assert v["ok"] or (v["ok"] is None and key == "driver_heap_after_gc_mib"), f"{key}: {v['verdict']} after warm-up (tolerance {tolerance:.0%}): {values}; " \
                        f"driver JVM RSS {[w.get('driver_jvm_rss_mib') for w in windows]}"
    # the compacted topics: bounded by a segment per partition in use (see the module docstring)
    for name, partitions in (("txn_state_bytes", min(max(ids), TXN_STATE_PARTITIONS)),
                             ("commit_log_bytes", COMMIT_LOG_PARTITIONS)):
        v = r["verdicts"][name]
        assert v["last"] - v["first"] <= partitions * SEGMENT_BYTES, \
            f"{name} grew by {v['last'] - v['first']} bytes after warm-up, more than a {SEGMENT_BYTES}-byte segment " \
            f"for each of {partitions} partitions: {[w.get(name) for w in windows]}"

    audit = r["audit"]
    assert audit["ok"], audit
    assert audit["input_records"] == audit["output_records"] > BATCHES
    if failed:  # the rest holds; what is known to grow still does (see KNOWN_GROWTH)
        pytest.xfail("; ".join(f"{k} grows: {KNOWN_GROWTH[k]}" for k in failed) + "\n" + why)
