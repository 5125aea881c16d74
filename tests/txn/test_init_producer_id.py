"""InitProducerId with a transactional id: new ids, epoch bumps and fencing (KIP-360 included),
requests queued behind a pending change, and the fence-and-abort of an Ongoing transaction."""

from __future__ import annotations

import pytest

from oncelog.config.settings import TxnConfig
from oncelog.txn.state import MAX_EPOCH

from .harness import E, P0, P1, T, TIMEOUT, TXN, Harness, meta


def test_init_new_id_gets_epoch_zero_and_a_persisted_empty_record():
    h = Harness()
    assert h.init(timeout=12_345).result == (E.none, 1000, 0)
    (rec,) = h.records()
    assert (rec.producer_id, rec.producer_epoch, rec.state, rec.timeout_ms) == (1000, 0, T.EMPTY, 12_345)
    assert rec.partitions == set() and rec.start_ms == -1
    assert h.txn().state is T.EMPTY and not h.txn().pending
    assert h.coord.txns == {TXN: h.txn()} and h.txn().producer_id == 1000


def test_init_is_answered_only_after_the_record_is_durable():
    h = Harness()
    h.persist_mode = "hold"
    r = h.init()
    # a pending placeholder is visible at once (so concurrent requests queue behind it), but the
    # producer id is not mapped and nothing is answered until the record is durable
    assert not r.called
    assert h.txn().pending and (h.txn().producer_id, h.txn().state) == (1000, T.EMPTY)
    h.release_persist()
    assert r.result == (E.none, 1000, 0)
    assert not h.txn().pending and h.txn().producer_id == 1000


def test_init_persist_failure_installs_nothing():
    h = Harness()
    h.persist_mode = "fail"
    assert h.init().result == (E.not_coordinator, -1, -1)
    assert h.coord.txns == {} and h.coord.open == {}


def test_no_producer_id_block_is_retriable_and_installs_nothing():
    """A full disk: no block of producer ids can be made durable. InitProducerId of a new
    transactional id is answered COORDINATOR_LOAD_IN_PROGRESS (retriable, as Kafka answers while
    it waits for its next block) and nothing is installed; once ids come again it succeeds."""
    h = Harness()
    h.allocate_fails = True
    assert h.init().result == (E.coordinator_load_in_progress, -1, -1)
    assert TXN not in h.coord.txns and h.persisted == []
    h.allocate_fails = False
    assert h.init().result == (E.none, 1000, 0)


def test_reinit_bumps_the_epoch_and_fences_the_previous_instance():
    h = Harness()
    pid, e0 = h.producer()
    assert h.init().result == (E.none, pid, e0 + 1)
    rec = h.records()[-1]
    assert rec.producer_epoch == e0 + 1 and rec.state is T.EMPTY
    # Kafka prepareIncrementProducerEpoch: no expected epoch given -> lastProducerEpoch -1
    assert (rec.last_producer_id, rec.last_producer_epoch) == (pid, -1)
    # the old instance is fenced everywhere
    assert h.add(pid, e0).result == E.producer_fenced
    assert h.add(pid, e0, version=1).result == E.invalid_producer_epoch
    assert h.end(pid, e0).result == (E.producer_fenced, -1, -1)


def test_reinit_after_a_completed_transaction_starts_clean():
    h = Harness()
    pid, e = h.ongoing()
    assert h.end(pid, e).result[0] == E.none
    h.now += 10
    assert h.init(timeout=5_000).result == (E.none, pid, e + 1)
    m = h.txn()
    assert (m.state, m.partitions, m.start_ms, m.timeout_ms) == (T.EMPTY, set(), -1, 5_000)


def test_epoch_exhaustion_allocates_a_new_producer_id():
    h = Harness()
    h.coord.load(TXN, meta(pid=7, epoch=MAX_EPOCH, state=T.COMPLETE_COMMIT, partitions=()))
    assert h.init().result == (E.none, 1000, 0)
    m = h.txn()
    assert (m.producer_id, m.producer_epoch) == (1000, 0)
    assert h.coord.txns == {TXN: m}


def test_epoch_exhaustion_with_kip360_id_rotates_and_a_retry_gets_the_new_id():
    h = Harness()
    h.coord.load(TXN, meta(pid=7, epoch=MAX_EPOCH, state=T.EMPTY, partitions=()))
    assert h.init(pid=7, epoch=MAX_EPOCH).result == (E.none, 1000, 0)
    # the response was lost: the producer retries with the id/epoch it still has
    assert h.init(pid=7, epoch=MAX_EPOCH).result == (E.none, 1000, 0)
    assert h.next_pid == 1001  # no further id allocated


@pytest.mark.parametrize("timeout", [0, -1, TxnConfig().max_timeout_ms + 1])
def test_invalid_transaction_timeout(timeout):
    h = Harness()
    assert h.init(timeout=timeout).result == (E.invalid_transaction_timeout, -1, -1)
    assert h.persisted == []


def test_max_timeout_is_accepted_and_configurable():
    h = Harness(TxnConfig(max_timeout_ms=1_000))
    assert h.init(timeout=1_000).result[0] == E.none
    assert h.init(timeout=1_001).result == (E.invalid_transaction_timeout, -1, -1)


def test_empty_transactional_id_is_invalid_request():
    assert Harness().init(txn_id="").result == (E.invalid_request, -1, -1)


def test_init_while_a_change_is_pending_waits_then_runs_in_order():
    h = Harness()
    pid, e = h.producer()
    h.persist_mode = "hold"
    add = h.add(pid, e)
    new_instance = h.init()
    old_instance = h.init(pid=pid, epoch=e)
    assert not (add.called or new_instance.called or old_instance.called)
    assert len(h.held_persists) == 1  # the queued requests wrote nothing yet
    h.release_persist()
    assert h.answered[-3:] == [add, new_instance, old_instance]
    assert add.result == E.none
    # against the now Ongoing transaction the first InitProducerId fences and aborts it ...
    assert new_instance.result == (E.concurrent_transactions, -1, -1)
    assert h.states()[-3:] == [T.PREPARE_EPOCH_FENCE, T.PREPARE_ABORT, T.COMPLETE_ABORT]
    # ... so the second, run after it, names an epoch that is no longer current
    assert old_instance.result == (E.producer_fenced, -1, -1)
    assert (h.txn().state, h.txn().producer_epoch) == (T.COMPLETE_ABORT, e + 1)


def test_concurrent_init_of_a_new_transactional_id_waits_then_bumps():
    # Kafka puts the new metadata in its cache before the append (putTransactionStateIfNotExists) and
    # answers the second request CONCURRENT_TRANSACTIONS; here it waits for the first record and then
    # is an ordinary re-initialisation of the id the first created.
    h = Harness()
    h.persist_mode = "hold"
    first = h.init()
    second = h.init()
    assert not first.called and not second.called
    assert len(h.held_persists) == 1
    h.release_persist()
    assert h.answered == [first, second]
    assert first.result == (E.none, 1000, 0)
    assert second.result == (E.none, 1000, 1)
    assert h.next_pid == 1001  # one producer id only
    assert [(r.producer_id, r.producer_epoch, r.state) for r in h.records()] == [(1000, 0, T.EMPTY), (1000, 1, T.EMPTY)]
    assert h.coord.txns == {TXN: h.txn()} and h.txn().producer_id == 1000


def test_concurrent_init_of_a_new_transactional_id_whose_first_record_fails():
    h = Harness()
    h.persist_mode = "hold"
    first = h.init()
    second = h.init()
    add = h.add(1000, 0)  # a request naming the producer id the placeholder would get
    h.release_persist(error=E.kafka_storage_error)
    assert h.answered == [first, second, add]
    assert first.result == (E.not_coordinator, -1, -1)
    # re-run against no metadata at all: the second creates the id afresh with a new producer id
    assert second.result == (E.none, 1001, 0)
    assert add.result == E.invalid_producer_id_mapping
    assert h.txn().producer_id == 1001
    assert not h.txn().pending and not h.txn().waiting


def test_init_while_markers_are_written_waits_for_the_transaction_to_complete():
    h = Harness()
    pid, e = h.ongoing()
    h.marker_mode = "hold"
    assert h.end(pid, e).result[0] == E.none
    assert h.txn().state is T.PREPARE_COMMIT and h.txn().pending
    r = h.init()
    assert not r.called
    h.release_markers()
    assert h.states()[-2:] == [T.COMPLETE_COMMIT, T.EMPTY]
    assert r.result == (E.none, pid, e + 1)
    assert (h.txn().state, h.txn().producer_epoch) == (T.EMPTY, e + 1)


def test_init_during_a_stuck_prepare_is_concurrent_transactions():
    # markers failed: PrepareCommit with nothing in flight until tick() retries
    h = Harness()
    pid, e = h.ongoing()
    h.marker_mode = "fail"
    assert h.end(pid, e).result[0] == E.none
    assert h.txn().state is T.PREPARE_COMMIT and not h.txn().pending
    assert h.init().result == (E.concurrent_transactions, -1, -1)
    assert h.init(pid=pid, epoch=e).result == (E.concurrent_transactions, -1, -1)
    h.marker_mode = "ok"
    h.tick(1)
    assert h.init().result == (E.none, pid, e + 1)


def test_kip360_reinit_with_current_id_bumps_and_a_retry_gets_the_current_epoch():
    h = Harness()
    pid, e = h.producer()
    assert h.init(pid=pid, epoch=e).result == (E.none, pid, e + 1)
    n = len(h.persisted)
    # response lost; the producer retries with the id/epoch it had
    assert h.init(pid=pid, epoch=e).result == (E.none, pid, e + 1)
    assert len(h.persisted) == n  # nothing new written, no second bump
    # with the epoch it now has, it bumps again
    assert h.init(pid=pid, epoch=e + 1).result == (E.none, pid, e + 2)


@pytest.mark.parametrize("given", [(999, 0), ("pid", 5), ("pid", -1)])
def test_kip360_reinit_with_a_wrong_id_or_epoch_is_fenced(given):
    h = Harness()
    pid, e = h.producer()
    assert h.init(pid=pid, epoch=e).result == (E.none, pid, e + 1)
    gpid, gepoch = given
    assert h.init(pid=pid if gpid == "pid" else gpid, epoch=gepoch).result == (E.producer_fenced, -1, -1)
    assert h.txn().producer_epoch == e + 1


def test_kip360_reinit_of_an_unknown_transactional_id_gets_a_fresh_id():
    # Kafka: a producer recovering from UNKNOWN_PRODUCER_ID after its id expired gets new metadata.
    h = Harness()
    assert h.init(pid=55, epoch=4).result == (E.none, 1000, 0)


def test_zombie_cannot_reinit_after_a_new_instance_took_over():
    # Kafka prepareIncrementProducerEpoch: with no expected epoch, lastProducerEpoch = -1 ("a new producer
    # calling InitProducerId would have caused the last epoch to be set to -1"), so the old instance's
    # InitProducerId(pid, old epoch) gets PRODUCER_FENCED instead of the new instance's epoch.
    h = Harness()
    pid, e = h.producer()               # instance A
    assert h.init().result == (E.none, pid, e + 1)   # instance B (no id): fences A
    assert h.init(pid=pid, epoch=e).result == (E.producer_fenced, -1, -1)   # A tries KIP-360 re-init


# ------------------------------------------------------------------------------ InitProducerId on Ongoing


def test_init_on_ongoing_fences_aborts_with_the_new_epoch_and_answers_concurrent():
    h = Harness()
    pid, e = h.ongoing(P0, P1)
    n = len(h.persisted)
    assert h.init().result == (E.concurrent_transactions, -1, -1)
    new = h.records()[n:]
    assert [m.state for m in new] == [T.PREPARE_EPOCH_FENCE, T.PREPARE_ABORT, T.COMPLETE_ABORT]
    assert all(m.producer_epoch == e + 1 for m in new)
    # Kafka prepareFenceProducerEpoch: lastProducerEpoch -1, so the fenced instance is no "retry"
    assert all((m.last_producer_id, m.last_producer_epoch) == (pid, -1) for m in new)
    assert new[0].partitions == new[1].partitions == {P0, P1}
    assert h.markers == [(pid, e + 1, False, frozenset({P0, P1}))]
    m = h.txn()
    assert (m.state, m.producer_epoch, m.partitions) == (T.COMPLETE_ABORT, e + 1, set())
    # the old instance is fenced
    assert h.end(pid, e).result == (E.producer_fenced, -1, -1)
    assert h.add(pid, e).result == E.producer_fenced
    # the new instance retries and gets a further bumped epoch
    assert h.init().result == (E.none, pid, e + 2)


def test_init_on_ongoing_while_the_abort_is_in_progress():
    # The abort stays pending from the fence to CompleteAbort (each step starts the next write
    # before the previous one's completion returns), so the client's retry waits for all of it.
    h = Harness()
    pid, e = h.ongoing()
    h.marker_mode = "hold"
    assert h.init().result == (E.concurrent_transactions, -1, -1)  # the InitProducerId that fences
    assert h.txn().state is T.PREPARE_ABORT and h.txn().pending
    retry = h.init()
    assert not retry.called  # still aborting: waits
    h.release_markers()
    assert h.states()[-2:] == [T.COMPLETE_ABORT, T.EMPTY]
    assert retry.result == (E.none, pid, e + 2)
    assert (h.txn().state, h.txn().producer_epoch) == (T.EMPTY, e + 2)


def test_init_on_ongoing_fence_held_queues_other_requests():
    h = Harness()
    pid, e = h.ongoing()
    h.persist_mode = "hold"
    trigger = h.init()
    assert trigger.result == (E.concurrent_transactions, -1, -1)  # answered at once, fence still held
    assert h.txn().pending and h.txn().state is T.ONGOING
    old_end = h.end(pid, e)
    retry = h.init()
    assert h.tick(TIMEOUT * 2) == []  # pending: the timeout path leaves it alone
    assert not old_end.called and not retry.called and h.markers == []
    h.release_persist()
    assert h.states()[-4:] == [T.PREPARE_EPOCH_FENCE, T.PREPARE_ABORT, T.COMPLETE_ABORT, T.EMPTY]
    assert h.answered[-3:] == [trigger, old_end, retry]
    assert old_end.result == (E.producer_fenced, -1, -1)  # the old instance's commit lost the race
    assert retry.result == (E.none, pid, e + 2)
    assert h.markers == [(pid, e + 1, False, frozenset({P0, P1}))]


def test_init_on_ongoing_at_the_last_epoch_rotates_on_retry():
    h = Harness()
    h.coord.load(TXN, meta(pid=7, epoch=MAX_EPOCH, state=T.ONGOING))
    assert h.init().result == (E.concurrent_transactions, -1, -1)
    assert h.markers == [(7, MAX_EPOCH + 1, False, frozenset({P0, P1}))]
    assert h.init().result == (E.none, 1000, 0)


def test_init_on_ongoing_fence_write_failure_keeps_the_transaction_and_a_retry_fences():
    h = Harness()
    pid, e = h.ongoing()
    h.persist_mode = "fail"
    assert h.init().result == (E.concurrent_transactions, -1, -1)
    assert h.txn().state is T.ONGOING and h.txn().producer_epoch == e and not h.txn().pending
    h.persist_mode = "ok"
    assert h.init().result == (E.concurrent_transactions, -1, -1)
    assert h.txn().state is T.COMPLETE_ABORT and h.txn().producer_epoch == e + 1


def test_fence_followed_by_a_failed_prepare_abort_is_finished_by_tick():
    # Kafka keeps no durable PrepareEpochFence: a failed PrepareAbort append leaves the transaction
    # Ongoing (hasFailedEpochFence), so the timeout or the client's retry aborts it again. Here the
    # fence is durable and tick() writes its PrepareAbort again.
    h = Harness()
    pid, e = h.ongoing()
    h.persist_script = ["ok", "fail"]  # the fence is durable, the PrepareAbort write fails
    assert h.init().result == (E.concurrent_transactions, -1, -1)
    assert h.txn().state is T.PREPARE_EPOCH_FENCE and not h.txn().pending
    # nothing in flight: answered at once
    assert h.init().result == (E.concurrent_transactions, -1, -1)
    assert h.end(pid, e).result == (E.producer_fenced, -1, -1)
    assert h.end(pid, e + 1).result == (E.concurrent_transactions, -1, -1)
    assert h.tick(1) == []  # not an Ongoing timeout: a retry of the abort
    assert h.states()[-2:] == [T.PREPARE_ABORT, T.COMPLETE_ABORT]
    assert h.txn().state is T.COMPLETE_ABORT
    assert h.init().result == (E.none, pid, e + 2)


def test_zombie_cannot_reinit_after_its_transaction_was_fenced():
    # Kafka: the PrepareEpochFence path sets lastProducerEpoch = NO_PRODUCER_EPOCH, so after the abort an
    # InitProducerId(pid, fenced epoch) fails prepareIncrementProducerEpoch with PRODUCER_FENCED.
    h = Harness()
    pid, e = h.ongoing()
    assert h.init().result == (E.concurrent_transactions, -1, -1)   # new instance B fences A
    assert h.txn().state is T.COMPLETE_ABORT
    assert h.init(pid=pid, epoch=e).result == (E.producer_fenced, -1, -1)   # zombie A
