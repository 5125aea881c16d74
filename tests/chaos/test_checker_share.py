"""The checker's share-group classes (queue semantics) on hand-made histories.

Each history is JSON lines in the real format (``share-group``, ``share-poll``, ``share-ack``,
``share-final-done``, ``crash`` ops, :mod:`oncelog.chaos`) read back by ``load``: a history built
to contain one share anomaly flags that class only; a clean queue history (releases redelivered,
rejects never, a consumer that died with its records, an acknowledgement refused for a record
that had moved on, a broker crash that let a delivery count pass the limit, the final drain)
flags nothing. No broker: the checker is sans-IO.
"""

from __future__ import annotations

from .test_checker import History, assert_only, ops_of


class Share(History):
    """History with the share ops: ``deliver`` writes a share-poll, ``ack`` a share-ack."""

    def group(self, limit: int = 5, topics=("t",), isolation: str = "read_committed") -> None:
        self.ev(0, "ok", "share-group", {"group": "g", "topics": list(topics), "delivery_count_limit": limit,
                                         "isolation": isolation})

    def deliver(self, process: int, records: list[tuple]) -> None:
        """``records``: (partition, offset, value, delivery_count); the poll started 5 ns before."""
        self.t += 10
        self.ev(process, "ok", "share-poll", [["deliver", p, o, v, c] for p, o, v, c in records],
                self.t, since=self.t - 5)

    def ack(self, process: int, acks: list[tuple], outcome: str | None = "ok") -> None:
        """``acks``: (partition, offset, value, kind, delivery_count); ``outcome`` None: died."""
        inv = [["ack", p, o, v, k, c] for p, o, v, k, c in acks]
        self.ev(process, "invoke", "share-ack", inv)
        if outcome is not None:
            self.ev(process, outcome, "share-ack", [a + [outcome] for a in inv])

    def crash(self) -> None:
        self.ev(0, "ok", "crash", "broker")

    def drained(self, process: int, drained: bool = True) -> None:
        self.ev(process, "ok", "share-final-done", {"drained": drained, "quiet_s": 5})


def clean() -> Share:
    h = Share()
    h.group()
    h.send(1, [("t/0", 1, 0), ("t/0", 3, 1), ("t/0", 7, 2), ("t/1", 4, 0), ("t/1", 5, 1)])
    h.txn(2, "fail", [("t/1", 9, 2)], abort=True)                       # aborted: never delivered
    h.deliver(10, [("t/0", 0, 1, 1), ("t/0", 1, 3, 1), ("t/0", 2, 7, 1)])
    h.ack(10, [("t/0", 0, 1, "accept", 1), ("t/0", 1, 3, "release", 1), ("t/0", 2, 7, "reject", 1)])
    h.deliver(11, [("t/0", 1, 3, 2)])                                   # the release: again
    h.ack(11, [("t/0", 1, 3, "accept", 2)], outcome="info")             # unknown: counts as consumed
    h.deliver(12, [("t/1", 0, 4, 1)])
    h.ack(12, [("t/1", 0, 4, "accept", 1)], outcome=None)               # process 12 died
    h.deliver(13, [("t/1", 1, 5, 1)])                                   # its lock expires...
    h.deliver(14, [("t/1", 1, 5, 2)])                                   # ...someone else gets it
    h.ack(13, [("t/1", 1, 5, "accept", 1)], outcome="fail")             # refused: it had moved on
    h.ack(14, [("t/1", 1, 5, "release", 2)])
    for c in range(3, 6):
        h.deliver(15, [("t/1", 1, 5, c)])
        h.ack(15, [("t/1", 1, 5, "release", c)], outcome="ok" if c < 5 else None)
    h.crash()                                                           # acquisitions not persisted
    h.deliver(16, [("t/1", 1, 5, 6)])                                   # 6 <= limit 5 + 1 crash
    h.ack(16, [("t/1", 1, 5, "accept", 6)])
    h.drained(20)
    return h


def test_a_clean_queue_history_has_no_anomaly():
    result = clean().check()
    assert result.ok, result.table()
    share = result.info["share"]
    assert share["final_drain"] and share["lost"] == 0 and share["broker_crashes"] == 1
    assert share["acknowledgements"] == {"accept": 5, "release": 5, "reject": 1}


def test_share_accepted_twice_is_a_delivery_after_a_durable_accept():
    h = clean()
    h.deliver(21, [("t/0", 0, 1, 2)])
    result = h.check()
    assert_only(result, "share-accepted-twice")
    a = result.anomalies("share-accepted-twice")[0]
    assert set(a.ops) == {ops_of(h, 10, "share-ack")[0], ops_of(h, 21, "share-poll")[0]}
    # a delivery whose poll began before the accept was answered is no anomaly
    h = Share()
    h.group()
    h.send(1, [("t/0", 1, 0)])
    h.deliver(10, [("t/0", 0, 1, 1)])
    h.ev(10, "invoke", "share-ack", [["ack", "t/0", 0, 1, "accept", 1]])
    h.ev(11, "ok", "share-poll", [["deliver", "t/0", 0, 1, 2]], h.t + 20, since=h.t - 1)
    h.ev(10, "ok", "share-ack", [["ack", "t/0", 0, 1, "accept", 1, "ok"]])
    h.ack(11, [("t/0", 0, 1, "accept", 2)], outcome="fail")
    assert h.check().ok, h.check().table()


def test_share_rejected_redelivered_is_a_delivery_after_a_durable_reject():
    h = clean()
    h.deliver(21, [("t/0", 2, 7, 2)])
    h.ack(21, [("t/0", 2, 7, "accept", 2)], outcome="fail")
    assert_only(h.check(), "share-rejected-redelivered")


def test_share_lost_is_an_acknowledged_record_nobody_accepted_after_the_drain():
    h = clean()
    h.send(1, [("t/0", 11, 3)])
    result = h.check()
    assert_only(result, "share-lost")
    assert "never delivered" in result.anomalies("share-lost")[0].description
    # an accept that was refused (fail) does not consume it
    h = clean()
    h.send(1, [("t/0", 11, 3)])
    h.deliver(21, [("t/0", 3, 11, 1)])
    h.ack(21, [("t/0", 3, 11, "accept", 1)], outcome="fail")
    assert_only(h.check(), "share-lost")
    # without a final drain that got to the end nothing is called lost
    h = Share()
    h.group()
    h.send(1, [("t/0", 11, 0)])
    h.drained(20, drained=False)
    assert h.check().ok
    # delivered at the limit: it may have been archived
    h = clean()
    h.send(1, [("t/0", 11, 3)])
    h.deliver(21, [("t/0", 3, 11, 5)])
    h.ack(21, [("t/0", 3, 11, "release", 5)])
    assert h.check().ok, h.check().table()


def test_share_beyond_limit_is_a_delivery_count_over_the_limit_plus_crashes():
    h = Share()
    h.group()
    h.send(1, [("t/0", 1, 0)])
    h.crash()
    h.deliver(10, [("t/0", 0, 1, 6)])   # 6 <= 5 + 1 crash
    h.deliver(11, [("t/0", 0, 1, 7)])   # 7 > 5 + 1 crash
    h.ack(11, [("t/0", 0, 1, "accept", 7)])
    h.drained(20)
    result = h.check()
    assert_only(result, "share-beyond-limit")
    assert result.counts["share-beyond-limit"] == 1
    assert result.anomalies("share-beyond-limit")[0].ops == (ops_of(h, 11, "share-poll")[0],)
    h = Share()
    h.group(limit=3)
    h.send(1, [("t/0", 1, 0)])
    h.deliver(10, [("t/0", 0, 1, 4)])
    h.ack(10, [("t/0", 0, 1, "accept", 4)])
    h.drained(20)
    assert_only(h.check(), "share-beyond-limit")


def test_share_stale_ack_is_an_ok_for_a_record_given_to_another_since():
    h = Share()
    h.group()
    h.send(1, [("t/0", 1, 0)])
    h.deliver(10, [("t/0", 0, 1, 1)])
    h.deliver(11, [("t/0", 0, 1, 2)])                      # process 10's lock expired
    h.ack(11, [("t/0", 0, 1, "release", 2)])
    h.ack(10, [("t/0", 0, 1, "reject", 1)])                # answered ok: it was no longer 10's
    h.deliver(12, [("t/0", 0, 1, 3)])
    h.ack(12, [("t/0", 0, 1, "accept", 3)])
    h.drained(20)
    result = h.check()
    assert_only(result, "share-stale-ack", "share-rejected-redelivered")
    assert set(result.anomalies("share-stale-ack")[0].ops) == {ops_of(h, 10, "share-ack")[0],
                                                              ops_of(h, 11, "share-poll")[0]}


def test_share_aborted_read_is_a_record_of_an_aborted_transaction_delivered():
    h = clean()
    h.deliver(21, [("t/1", 2, 9, 1)])
    h.ack(21, [("t/1", 2, 9, "accept", 1)])
    assert_only(h.check(), "share-aborted-read")
    h = clean()
    h.events[0]["value"]["isolation"] = "read_uncommitted"   # then it may be given out
    h.deliver(21, [("t/1", 2, 9, 1)])
    h.ack(21, [("t/1", 2, 9, "accept", 1)])
    assert h.check().ok
