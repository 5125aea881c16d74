"""ListTransactions' filters (KIP-664, KIP-994 duration) over the coordinator's transactions, and
DescribeTransactions."""

from __future__ import annotations

import pytest

from oncelog import errors

from .harness import E, P0, T, TXN, Harness, meta


def _listing(h):
    h.coord.load("empty", meta("empty", pid=1, state=T.EMPTY, partitions=(), start=-1))
    h.coord.load("old", meta("old", pid=2, state=T.ONGOING, start=h.now - 10_000))
    h.coord.load("new", meta("new", pid=3, state=T.ONGOING, start=h.now - 100))
    h.coord.load("prep", meta("prep", pid=4, state=T.PREPARE_COMMIT, start=h.now - 5_000))
    h.coord.load("done", meta("done", pid=5, state=T.COMPLETE_ABORT, partitions=(), start=h.now - 20_000))
    h.coord.load("dead", meta("dead", pid=6, state=T.DEAD, partitions=(), start=h.now - 30_000))


def ids(txns):
    return sorted(m.transactional_id for m in txns)


def test_list_filters():
    h = Harness()
    _listing(h)
    assert ids(h.list()) == ["done", "empty", "new", "old", "prep"]
    assert ids(h.list(states={"Ongoing"})) == ["new", "old"]
    assert ids(h.list(states={"Ongoing", "PrepareCommit"})) == ["new", "old", "prep"]
    assert ids(h.list(states={"CompleteAbort", "Empty"})) == ["done", "empty"]
    assert ids(h.list(producer_ids={2, 4, 99})) == ["old", "prep"]
    # Kafka counts Empty from start -1, so it passes every duration filter
    assert ids(h.list(min_duration_ms=1_000)) == ["done", "empty", "old", "prep"]
    assert ids(h.list(states={"Ongoing"}, min_duration_ms=1_000)) == ["old"]
    assert ids(h.list(states={"Ongoing"}, producer_ids={3})) == ["new"]
    assert h.list(states={"Ongoing"}, producer_ids={4}) == []
    # Dead (an id being expired) is never listed, whatever the filters (Kafka listTransactionStates)
    assert h.list(states={"Dead"}) == [] and h.list(producer_ids={6}) == []
    assert "dead" in h.coord.txns


def test_list_sees_live_transitions():
    h = Harness()
    pid, e = h.ongoing()
    assert ids(h.list(states={"Ongoing"})) == [TXN]
    h.marker_mode = "hold"
    assert h.end(pid, e).result[0] == E.none
    assert ids(h.list(states={"PrepareCommit"})) == [TXN]
    h.release_markers()
    assert ids(h.list(states={"CompleteCommit"})) == [TXN]


def test_list_duration_filter_is_strictly_longer():
    # Kafka TransactionStateManager.listTransactionStates: excluded when now - start <= durationFilter.
    h = Harness()
    h.coord.load("x", meta("x", pid=2, state=T.ONGOING, start=h.now - 1_000))
    assert ids(h.list(min_duration_ms=999)) == ["x"]
    assert h.list(min_duration_ms=1_000) == []
    assert ids(h.list(min_duration_ms=0)) == ["x"]
    assert ids(h.list(min_duration_ms=-1)) == ["x"]  # -1: no filter


def test_list_duration_filter_includes_empty_transactions():
    h = Harness()
    h.coord.load("e", meta("e", pid=1, state=T.EMPTY, partitions=(), start=-1))
    assert ids(h.list(min_duration_ms=h.now)) == ["e"]  # now - (-1) > now
    assert ids(h.list(states={"Empty"}, min_duration_ms=10**9)) == []


def test_list_reports_unknown_state_filters():
    h = Harness()
    _listing(h)
    listing = h.coord.list_transactions({"Ongoing", "Bogus", "ongoing"})
    assert ids(listing.transactions) == ["new", "old"]
    assert listing.unknown_state_filters == ("Bogus", "ongoing")
    # only unknown states: nothing matches (not: no filter at all)
    assert h.list(states={"Bogus"}) == []
    assert h.coord.list_transactions().unknown_state_filters == ()


def test_describe_is_a_copy_and_unknown_ids_are_not_found():
    h = Harness()
    pid, e = h.ongoing(P0)
    d = h.coord.describe(TXN)
    assert (d.producer_id, d.producer_epoch, d.state, d.partitions) == (pid, e, T.ONGOING, {P0})
    d.state, d.partitions = T.DEAD, d.partitions | {("x", 9)}
    assert h.txn().state is T.ONGOING and h.txn().partitions == {P0}
    assert isinstance(h.txn().partitions, frozenset)  # copies share it: it must not change in place
    with pytest.raises(errors.TransactionalIdNotFound):
        h.coord.describe("nope")
