"""AddOffsetsToTxn and TxnOffsetCommit's check: the group's ``__consumer_offsets`` partition
(asked of the groups side through the injected ``offsets_partition``) joins the transaction, and
a transactional offset commit is accepted only from the current producer of an Ongoing
transaction that holds it."""

from __future__ import annotations

import pytest

from oncelog import errors

from .harness import E, OFFSETS_PARTITION, P0, T, TXN, Harness, Once


def add_offsets(h, pid, epoch, group="g", txn_id=TXN) -> Once:
    r = Once("add_offsets")
    h.coord.add_offsets(txn_id, pid, epoch, group, lambda error: r(errors.error_code_for(error) if error else E.none))
    return r


def test_add_offsets_adds_the_groups_offsets_partition():
    h = Harness()
    pid, e = h.ongoing(P0)
    assert add_offsets(h, pid, e).result == E.none
    assert h.txn().partitions == {P0, OFFSETS_PARTITION}
    assert h.records()[-1].partitions == {P0, OFFSETS_PARTITION}


def test_add_offsets_starts_a_transaction_and_is_fenced_like_add_partitions():
    h = Harness()
    pid, e = h.producer()
    assert add_offsets(h, pid, e + 1).result == E.producer_fenced
    assert add_offsets(h, pid + 1, e).result == E.invalid_producer_id_mapping
    assert add_offsets(h, pid, e).result == E.none
    assert (h.txn().state, h.txn().partitions) == (T.ONGOING, {OFFSETS_PARTITION})


def test_txn_offset_commit_check():
    h = Harness()
    pid, e = h.ongoing(P0)
    check = h.coord.check_txn_offset_commit
    with pytest.raises(errors.InvalidTxnState):
        check(TXN, pid, e, "g")  # AddOffsetsToTxn not called
    assert add_offsets(h, pid, e).result == E.none
    assert check(TXN, pid, e, "g") is None
    with pytest.raises(errors.ProducerFenced):
        check(TXN, pid, e - 1 if e else 9, "g")
    with pytest.raises(errors.InvalidProducerIdMapping):
        check(TXN, pid + 1, e, "g")
    with pytest.raises(errors.InvalidProducerIdMapping):
        check("other", pid, e, "g")
    assert h.end(pid, e).result[0] == E.none
    with pytest.raises(errors.InvalidTxnState):
        check(TXN, pid, e, "g")  # committed: no transaction open


def test_needs_partition_added():
    # Produce v12 (TV2) adds a batch's partition to the transaction first unless it is there
    h = Harness()
    pid, e = h.producer()
    assert h.coord.needs_partition_added(TXN, pid, *P0)
    assert h.add(pid, e, P0, tv2=True).result == E.none
    assert not h.coord.needs_partition_added(TXN, pid, *P0)
    assert h.coord.needs_partition_added(TXN, pid, "t", 1)
    # not this producer's id, or an unknown id: nothing to add (verification refuses the batch)
    assert not h.coord.needs_partition_added(TXN, pid + 1, *P0)
    assert not h.coord.needs_partition_added("other", pid, *P0)
