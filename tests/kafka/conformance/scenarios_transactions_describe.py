"""The transaction APIs that look on: DescribeTransactions, ListTransactions and
DescribeProducers, in the transaction states :mod:`.scenarios_transactions` drives (with its
helpers).
"""

from __future__ import annotations

from .framework import LIST_TRANSACTIONS, batch, mod, scenario
from .scenarios_transactions import begin, describe, describe_producers, end, list_txns, txn_batch


# ---------------------------------------------------------------------- Describe/List


@scenario("transactions")
def describe_unknown(k):
    """DescribeTransactions of an id never seen: TRANSACTIONAL_ID_NOT_FOUND."""
    return describe(k, k.name("never"))


@scenario("transactions")
def describe_ongoing(k):
    """DescribeTransactions of an Ongoing transaction: state, timeout, epoch, partitions."""
    t = k.create_topic("t", partitions=3)
    tid, pid, epoch = begin(k, "tx", {t: [2, 0]}, timeout_ms=45000)
    return describe(k, tid)


@scenario("transactions")
def list_by_producer_and_state(k):
    """ListTransactions filtered by producer id, then by producer id and state Ongoing / Empty."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    return [list_txns(k, pids=[pid]), list_txns(k, ["Ongoing"], [pid]), list_txns(k, ["Empty"], [pid])]


@scenario("transactions")
def list_unknown_state_filter(k):
    """ListTransactions with a state filter that names no state: listed in unknown_state_filters."""
    tid, pid, epoch = begin(k, "tx")
    return list_txns(k, ["Bogus"], [pid])


@scenario("transactions")
def list_after_commit(k):
    """ListTransactions of a producer whose transaction committed: CompleteCommit."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    end(k, tid, pid, epoch, True)
    return [list_txns(k, pids=[pid]), list_txns(k, ["CompleteCommit"], [pid], version=0)]


@scenario("transactions")
def describe_producers_idempotent(k):
    """DescribeProducers after an idempotent producer's two batches: last sequence 2, no transaction."""
    t = k.create_topic("t")
    init = k.init_producer_id()
    k.produce(t, batch([b"a", b"b"], pid=init.producer_id, epoch=init.producer_epoch, seq=0))
    k.produce(t, batch([b"c"], pid=init.producer_id, epoch=init.producer_epoch, seq=2))
    return describe_producers(k, t)


@scenario("transactions")
def describe_producers_open_txn(k):
    """DescribeProducers during an open transaction: current_txn_start_offset is its first offset."""
    t = k.create_topic("t")
    k.produce(t, batch([b"plain"]))
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    k.produce(t, txn_batch([b"x"], pid, epoch, 0), transactional_id=tid)
    return describe_producers(k, t)


@scenario("transactions")
def describe_producers_after_commit(k):
    """DescribeProducers after the commit's marker: no open transaction (-1)."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    k.produce(t, txn_batch([b"x"], pid, epoch, 0), transactional_id=tid)
    end(k, tid, pid, epoch, True)
    return describe_producers(k, t)


@scenario("transactions")
def describe_producers_unknown_partition(k):
    """DescribeProducers of a partition that does not exist and of a missing topic."""
    t = k.create_topic("t")
    return [describe_producers(k, t, (3,)), describe_producers(k, k.name("missing"))]


def list_txns_v2(k, pattern, pids=()):
    m = mod(LIST_TRANSACTIONS, 2)
    return k.send(m.ListTransactionsRequest(state_filters=(), producer_id_filters=tuple(pids), duration_filter=-1,
                                            transactional_id_pattern=pattern))


@scenario("transactions")
def list_v2_transactional_id_pattern(k):
    """ListTransactions v2 (KIP-1152): a pattern matching the whole id, one matching part of it, none."""
    tid, pid, epoch = begin(k, "tx-pattern")
    return [list_txns_v2(k, ".*tx-pat.*", [pid]), list_txns_v2(k, "tx-pat", [pid]), list_txns_v2(k, None, [pid]),
            list_txns_v2(k, "", [pid])]


@scenario("transactions")
def list_v2_invalid_pattern(k):
    """ListTransactions v2 with a pattern that is not a regular expression."""
    tid, pid, epoch = begin(k, "tx")
    return list_txns_v2(k, "(unclosed", [pid])
