"""oncelog.notices: the rejections a response carries are found at any depth, and arrays whose
entries cannot hold an error code are not walked entry by entry (a ListTransactions answer lists
every id a broker holds)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from oncelog.apis._base import NO_THROTTLE, build, response_module
from oncelog.notices import _may_hold_codes, notable_errors


def test_a_nested_rejection_is_found_with_what_it_is_about():
    m = response_module(65, 0)  # DescribeTransactions: a code per transactional id
    entry = dict(transaction_state="", transaction_timeout=0, transaction_start_time=-1, producer_id=-1,
                 producer_epoch=-1, topics=())
    resp = build(m.DescribeTransactionsResponse, throttle_time=NO_THROTTLE, transaction_states=(
        m.TransactionState(error_code=ErrorCode.none, transactional_id="fine", **entry),
        m.TransactionState(error_code=ErrorCode.invalid_txn_state, transactional_id="orders-1", **entry)))
    assert _may_hold_codes(m.TransactionState)
    [(code, where, _message)] = notable_errors(resp)
    assert code == ErrorCode.invalid_txn_state and "transactional_id=orders-1" in where


def test_entries_without_codes_are_not_walked_but_the_top_level_code_is_read():
    m = response_module(66, 1)
    assert not _may_hold_codes(m.TransactionState)
    assert _may_hold_codes(m.ListTransactionsResponse)

    class Exploding(m.TransactionState):  # reading an entry's fields would fail the test
        def __getattribute__(self, name):
            if name in ("transactional_id", "producer_id", "transaction_state"):
                raise AssertionError("an entry was walked")
            return super().__getattribute__(name)

    entries = (Exploding(transactional_id="t", producer_id=1, transaction_state="Empty"),) * 3
    resp = build(m.ListTransactionsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.invalid_txn_state,
                 unknown_state_filters=(), transaction_states=entries)
    assert [c for c, _w, _m in notable_errors(resp)] == [ErrorCode.invalid_txn_state]
