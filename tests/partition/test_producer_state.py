"""Append rules of the idempotent producer, at the producer-state level (no sockets)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from oncelog.errors import InvalidProducerEpoch, OutOfOrderSequence
from oncelog.partition.producer_state import INT32_MAX, ProducerStateManager


def batch(pid=7, epoch=0, seq=0, count=1):
    last = (seq + count - 1) % (INT32_MAX + 1)
    return SimpleNamespace(producer_id=pid, producer_epoch=epoch, base_sequence=seq, last_sequence=last,
                           record_count=count, is_control=False, is_transactional=False)


class Log:
    """Just enough of a partition: assigns offsets the way the log would."""

    def __init__(self):
        self.state = ProducerStateManager()
        self.next_offset = 0

    def append(self, *batches):
        pending, dup = self.state.prepare(list(batches))
        if dup is not None:
            return ("duplicate", dup.first_offset)
        firsts = []
        for b in batches:
            firsts.append(self.next_offset)
            self.next_offset += b.record_count
        self.state.commit(pending, firsts, now_ms=1000)
        return ("appended", firsts[0])


def test_in_order_batches_are_accepted():
    log = Log()
    assert log.append(batch(seq=0, count=3)) == ("appended", 0)
    assert log.append(batch(seq=3, count=2)) == ("appended", 3)
    assert log.state.producers[7].last_seq == 4


def test_retry_of_any_of_the_last_five_batches_is_a_duplicate_with_its_original_offset():
    log = Log()
    for i in range(6):
        log.append(batch(seq=i * 2, count=2))
    # batches at seq 2..11 are cached (the last five); seq 0..1 fell out of the window
    for i in range(1, 6):
        assert log.append(batch(seq=i * 2, count=2)) == ("duplicate", i * 2)
    with pytest.raises(OutOfOrderSequence):
        log.append(batch(seq=0, count=2))
    assert log.next_offset == 12  # nothing was written twice


def test_gap_is_out_of_order():
    log = Log()
    log.append(batch(seq=0))
    with pytest.raises(OutOfOrderSequence, match="expected sequence 1, got 5"):
        log.append(batch(seq=5))


def test_older_epoch_is_fenced():
    log = Log()
    log.append(batch(epoch=3, seq=0))
    with pytest.raises(InvalidProducerEpoch):
        log.append(batch(epoch=2, seq=1))


def test_new_epoch_must_start_at_zero():
    log = Log()
    log.append(batch(epoch=0, seq=0, count=10))
    with pytest.raises(OutOfOrderSequence, match="new epoch"):
        log.append(batch(epoch=1, seq=10))
    assert log.append(batch(epoch=1, seq=0)) == ("appended", 10)
    # the old epoch's batches are forgotten: its retry is now fenced, not a duplicate
    with pytest.raises(InvalidProducerEpoch):
        log.append(batch(epoch=0, seq=0, count=10))


def test_unknown_producer_with_nonzero_sequence_is_accepted():
    # Kafka since KIP-360 (ProducerAppendInfo.checkSequence): a producer without state on the
    # partition may start anywhere (retention or DeleteRecords may have removed its state).
    log = Log()
    assert log.append(batch(pid=99, seq=17)) == ("appended", 0)
    assert log.append(batch(pid=99, seq=18))[0] == "appended"
    with pytest.raises(OutOfOrderSequence):
        log.append(batch(pid=99, seq=0))


def test_sequence_wraps_around_int32():
    log = Log()
    # put the producer just before the wrap
    log.state._apply(7, 0, INT32_MAX - 1, INT32_MAX, 100, 101, 1000)
    assert log.append(batch(seq=0, count=2))[0] == "appended"
    # and a batch spanning the wrap gets last_sequence computed modulo 2^31
    log2 = Log()
    log2.state._apply(8, 0, 0, INT32_MAX - 2, 0, 5, 1000)
    assert log2.append(batch(pid=8, seq=INT32_MAX - 1, count=4))[0] == "appended"
    assert log2.state.producers[8].last_seq == 1


def test_batches_of_one_request_are_checked_together_and_nothing_changes_on_error():
    log = Log()
    log.append(batch(seq=0))
    assert log.append(batch(seq=1), batch(seq=2), batch(seq=3)) == ("appended", 1)
    with pytest.raises(OutOfOrderSequence):
        log.append(batch(seq=4), batch(seq=6))
    assert log.state.producers[7].last_seq == 3
    assert log.append(batch(seq=4)) == ("appended", 4)


def test_batches_without_producer_id_are_ignored():
    log = Log()
    assert log.append(batch(pid=-1, epoch=-1, seq=-1)) == ("appended", 0)
    assert log.state.producers == {}


def test_snapshot_round_trip_and_expiry_and_log_start():
    log = Log()
    log.append(batch(pid=1, seq=0, count=3))
    log.append(batch(pid=2, seq=0, count=3))
    text = log.state.to_json(offset=6)
    other = ProducerStateManager()
    assert other.load_json(text) == 6
    assert other.producers[1].find_duplicate(0, 0, 2).first_offset == 0
    # Producer 1's batches are all below the new start: it keeps its state (as Kafka since
    # KIP-360), and the caller is told to snapshot it; only expiry removes producers.
    assert other.on_log_start_advanced(3) is True
    assert sorted(other.producers) == [1, 2]
    assert other.on_log_start_advanced(0) is False
    assert other.expire(now_ms=1000 + 10, expiration_ms=5) == 2
    assert other.producers == {}


# ---------------------------------------------------------------------- expiry

def test_a_producer_expires_once_idle_for_exactly_the_expiration_as_kafka():
    # Kafka's isProducerExpired: currentTimeMs - lastTimestamp >= producer.id.expiration.ms
    log = Log()
    log.append(batch(pid=1, seq=0))  # at 1000
    assert log.state.expire(now_ms=1000 + 99, expiration_ms=100) == 0
    assert log.state.expire(now_ms=1000 + 100, expiration_ms=100) == 1 and log.state.producers == {}
    # its next batch is taken at any sequence, as an unknown producer's (KIP-360)
    assert log.append(batch(pid=1, seq=5)) == ("appended", 1)


def test_a_producer_with_a_transaction_open_here_never_expires():
    state = ProducerStateManager()
    state.begin_txn(3, 0, first_offset=0, ts=1000)
    assert state.expire(now_ms=10**12, expiration_ms=1) == 0 and state.first_unstable_offset() == 0
    state.complete_txn(3, 0, marker_offset=1, ts=2000)
    assert state.expire(now_ms=2000 + 1, expiration_ms=1) == 1 and state.producers == {}


def test_an_entry_keeps_the_last_five_batches_in_a_small_tuple():
    log = Log()
    for seq in range(8):
        log.append(batch(pid=1, seq=seq))
    entry = log.state.producers[1]
    assert [b.first_seq for b in entry.batches] == [3, 4, 5, 6, 7] and isinstance(entry.batches, tuple)
    assert not hasattr(entry, "__dict__")  # slots: a partition may hold many of these
    log.state.complete_txn(1, 1, marker_offset=8, ts=2000)  # a new epoch forgets them
    assert entry.batches == () and entry.producer_epoch == 1
