"""The sink's commit protocols against Apache Kafka's transaction coordinator, driven directly
(no Spark): the fencing rules that tests/spark/test_sink.py and test_sink_partition.py check
against oncelog, here answered by Apache Kafka 4.x (transaction version 2 on by default; the
connector's client sends the version-1 requests, EndTxn v3, so that a process other than the
producer may end a transaction by its producer id and epoch)."""

from __future__ import annotations

import uuid

import pytest

from tests.spark import test_sink, test_sink_partition

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]


def test_stale_run_is_fenced_and_zombie_transactions_are_swept(apache_kafka):
    test_sink.test_stale_run_is_fenced_and_zombie_transactions_are_swept(apache_kafka, uuid.uuid4().hex[:8])


def test_decided_batch_aborted_by_the_coordinator_fails_loudly(apache_kafka):
    """Apache Kafka aborts a transaction past its timeout on its next scan
    (transaction.abort.timed.out.transaction.cleanup.interval.ms, 10 s by default)."""
    test_sink.test_decided_batch_aborted_by_the_coordinator_fails_loudly(apache_kafka, uuid.uuid4().hex[:8])


def test_marker_commits_with_the_rows_and_fences_older_attempts(apache_kafka):
    test_sink_partition.test_marker_commits_with_the_rows_and_fences_older_attempts(apache_kafka, uuid.uuid4().hex[:8])


def test_a_batch_is_complete_before_its_barrier_ends(apache_kafka):
    """On Apache Kafka the window is real: EndTxn is answered before the markers are written."""
    prepared = test_sink.complete_before_barrier_ends(apache_kafka, uuid.uuid4().hex[:8], rounds=20)
    assert prepared > 0, "every EndTxn answer came after the markers: the window did not show"
