"""The transactional-id pool's rules (oncelog/spark/txn_pool.py), pure: names, the choice of a
run's generation from the decisions' run history, and what the orphan sweep may match. The
pool against a real broker and Spark: tests/spark/test_sink_pool.py."""

from __future__ import annotations

import re

from oncelog.spark.release import OpenWrite, _owned
from oncelog.spark.txn_pool import GENERATIONS, RunHistory, sweep_pattern, task_transactional_id


def test_a_run_keeps_its_generation_and_a_new_run_takes_the_other():
    h = RunHistory()
    assert h.generation_for("r1") == 0  # nothing decided yet
    h = h.after("r1", 0)
    assert h.generation_for("r1") == 0  # batch after batch of one run: the same ids
    assert h.generation_for("r2") == 1  # the next run: the other half
    h = h.after("r2", 1)
    assert h.generation_for("r2") == 1
    assert h.generation_for("r3") == 0  # not the newest run's half
    assert h.after("r3", 0).runs == (("r3", 0), ("r2", 1))  # bounded: GENERATIONS entries


def test_the_history_holds_at_most_one_entry_per_generation_and_survives_json():
    h = RunHistory()
    for i in range(50):
        h = h.after(f"r{i}", h.generation_for(f"r{i}"))
        assert len(h.runs) <= GENERATIONS
    again = RunHistory.from_json(h.to_json())
    assert again == h
    # A decision of an earlier version has no history; damaged entries are skipped.
    assert RunHistory.from_json(None) == RunHistory()
    assert RunHistory.from_json([["a", 7], ["b"], "x", ["c", 1]]) == RunHistory((("c", 1),))


def test_ids_are_bounded_by_generations_tasks_and_attempts():
    ids = set()
    h = RunHistory()
    for run in range(20):  # 20 runs of 30 micro-batches, 3 tasks, a retry now and then
        g = h.generation_for(f"run{run}")
        for batch in range(30):
            for task in range(3):
                ids.add(task_transactional_id("q", g, task, (batch + run) % 2))
        h = h.after(f"run{run}", g)
    assert len(ids) == GENERATIONS * 3 * 2


def test_the_sweep_matches_this_querys_task_ids_only():
    pattern = re.compile(sweep_pattern("oncelog-totals"))
    ours = ["oncelog-totals-g0-1-0", "oncelog-totals-g1-12-3", "oncelog-totals-82dc915d-0-0"]  # pooled, earlier naming
    theirs = ["oncelog-totals.barrier", "oncelog-totals.commits",  # the decider and the barrier
              "oncelog-totals-eu-g0-0-0", "oncelog-totals-eu-82dc915d-0-0",  # a query whose prefix continues ours
              "oncelog-totals.p0", "oncelog-totals-g0-1"]
    assert [i for i in ours if pattern.fullmatch(i)] == ours
    assert not [i for i in theirs if pattern.fullmatch(i)]


def _write(query_id=None, opened_ms=1000) -> OpenWrite:
    return OpenWrite("p", "127.0.0.1:9092", {}, "commits", "batch", None, query_id, opened_ms)


def test_which_open_writes_a_terminated_query_owns():
    # A streaming sink's: by query id, unless a new run of the query is already active.
    assert _owned(_write("q1"), "q1", "run", set(), ended_ms=2000)
    assert not _owned(_write("q1"), "q1", "run", {"q1"}, ended_ms=2000)
    assert not _owned(_write("q2"), "q1", "run", {"q2"}, ended_ms=2000)
    # Opened after the end: another run's.
    assert not _owned(_write("q1", opened_ms=3000), "q1", "run", set(), ended_ms=2000)
    # A df.write's (foreachBatch): any, once no query is active any more.
    assert _owned(_write(None), "q1", "run", set(), ended_ms=2000)
    # ... but never while a new run of the terminated query is active: its foreachBatch may be
    # writing the same prefix, whose latest decision is still the old run's until it decides (the
    # old rule released the new run's first batch: its barrier and its tasks' transactions aborted,
    # "batch lost", when the release's second pass came after the restart); nor a record the
    # next run's prepare() wrote after the end, whenever the pass looks.
    assert not _owned(_write(None), "q1", "run", {"q1"}, ended_ms=2000)
    assert not _owned(_write(None, opened_ms=2500), "q1", "run", set(), ended_ms=2000)
