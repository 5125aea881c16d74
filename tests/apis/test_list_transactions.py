"""ListTransactions v2's transactional id pattern (KIP-1152), as Kafka answers it: the whole id
must match; null or empty lists all; a pattern that does not compile is INVALID_REGULAR_EXPRESSION."""

from __future__ import annotations

from .harness import E, request_module, run

LIST_TRANSACTIONS = 66


async def _list(api, pattern, version=2):
    m = request_module(LIST_TRANSACTIONS, version)
    resp = await api.call(LIST_TRANSACTIONS, version, m.ListTransactionsRequest(
        state_filters=(), producer_id_filters=(), duration_filter=-1, transactional_id_pattern=pattern))
    return resp.error_code, sorted(t.transactional_id for t in resp.transaction_states)


def test_the_pattern_must_match_the_whole_transactional_id(tmp_path):
    async def scenario(api):
        await api.producer("orders-1")
        await api.producer("payments-1")
        assert await _list(api, "orders-.*") == (E.none, ["orders-1"])
        assert await _list(api, "orders") == (E.none, [])  # a part is not enough (Pattern.matches)
        assert await _list(api, ".*-1") == (E.none, ["orders-1", "payments-1"])
        assert await _list(api, None) == (E.none, ["orders-1", "payments-1"])
        assert await _list(api, "") == (E.none, ["orders-1", "payments-1"])

    run(tmp_path, scenario)


def test_a_pattern_that_does_not_compile_lists_nothing(tmp_path):
    async def scenario(api):
        await api.producer("orders-1")
        assert await _list(api, "(unclosed") == (E.invalid_regular_expression, [])

    run(tmp_path, scenario)


def test_a_long_listing_is_made_in_chunks_and_answers_every_id(tmp_path, monkeypatch):
    """Above CHUNK ids the listing is made a chunk at a time (the event loop serves other requests
    in between) and encoded off the loop: the same ids, filters and ACLs apply."""
    from oncelog.apis import list_transactions

    monkeypatch.setattr(list_transactions, "CHUNK", 3)

    async def scenario(api):
        ids = [f"orders-{i}" for i in range(10)] + ["payments-1"]
        for t in ids:
            await api.producer(t)
        assert await _list(api, None) == (E.none, sorted(ids))
        assert await _list(api, "orders-.*") == (E.none, sorted(ids[:10]))
        m = request_module(LIST_TRANSACTIONS, 0)
        resp = await api.call(LIST_TRANSACTIONS, 0, m.ListTransactionsRequest(
            state_filters=("Ongoing",), producer_id_filters=()))
        assert (resp.error_code, resp.transaction_states) == (E.none, ())

    run(tmp_path, scenario)
