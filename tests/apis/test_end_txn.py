"""EndTxn (key 26) against an in-process broker: InitProducerId -> AddPartitionsToTxn ->
transactional Produce -> EndTxn, seen through read_committed Fetch; fencing and its error code per
request version (oncelog.apis._txn.PRODUCER_FENCED_SINCE); unknown ids; retries; transaction
version 2 (EndTxn v5 bumps the epoch)."""

from __future__ import annotations

import pytest

from oncelog.config.settings import FsyncPolicy
from oncelog.protocol import records as rb

from .harness import E, READ_COMMITTED, batch, committed_view, records_of, run, settled, wait_until

P0, P1 = ("t", 0), ("t", 1)


async def _produce_txn(api, pid, epoch, values, *, index=0, seq=0, version=9):
    p = await api.produce("t", batch(values, pid=pid, epoch=epoch, seq=seq, transactional=True), index=index,
                          transactional_id="tx", version=version)
    assert p.error_code == E.none, p
    return p.base_offset


def _values(records):
    return [r.value for r in records]


def test_commit_makes_the_records_visible_followed_by_a_commit_marker(tmp_path):
    async def scenario(api):
        await api.create_topic("t", partitions=2)
        pid, epoch = await api.begin("tx", [P0, P1])
        await _produce_txn(api, pid, epoch, [b"a", b"b", b"c"])
        await _produce_txn(api, pid, epoch, [b"x"], index=1)
        before = await api.fetch("t", isolation_level=READ_COMMITTED)
        assert (before.last_stable_offset, records_of(before.records)) == (0, [])

        resp = await api.end_txn("tx", pid, epoch, commit=True)
        assert resp.error_code == E.none

        p0 = await settled(api, "t", 0)
        assert (p0.high_watermark, p0.last_stable_offset) == (4, 4)
        records = records_of(p0.records)
        assert [(r.offset, r.value) for r in records[:3]] == [(0, b"a"), (1, b"b"), (2, b"c")]
        marker = records[3]
        assert (marker.offset, marker.control, marker.producer_id) == (3, rb.CONTROL_COMMIT, pid)
        assert not p0.aborted_transactions
        assert _values(committed_view(p0)) == [b"a", b"b", b"c"]
        p1 = await settled(api, "t", 1)
        assert [(r.offset, r.control) for r in records_of(p1.records)] == [(0, None), (1, rb.CONTROL_COMMIT)]

        # the coordinator completes the transaction once the markers are durable; the same
        # producer (transaction version 1: same epoch) runs the next one
        await api.add_partitions("tx", pid, epoch, [P0])
        assert await _produce_txn(api, pid, epoch, [b"d"], seq=3) == 4
        assert (await api.end_txn("tx", pid, epoch, commit=True)).error_code == E.none
        p0 = await settled(api, "t", 0)
        assert _values(committed_view(p0)) == [b"a", b"b", b"c", b"d"]

    run(tmp_path, scenario)


def test_abort_hides_the_records_behind_an_abort_marker(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        await api.produce("t", batch([b"plain"]))
        pid, epoch = await api.begin("tx", [P0])
        await _produce_txn(api, pid, epoch, [b"a", b"b"])
        assert (await api.end_txn("tx", pid, epoch, commit=False)).error_code == E.none

        p = await settled(api, "t")
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 1)]
        assert [(r.offset, r.control) for r in records_of(p.records)][-1] == (3, rb.CONTROL_ABORT)
        assert _values(committed_view(p)) == [b"plain"]

    run(tmp_path, scenario)


def test_an_abort_marker_not_yet_durable_still_holds_back_read_committed(tmp_path):
    """Kafka's LSO counts a transaction ended by a marker that is not yet below the high
    watermark (unreplicatedTxns): under ``fsync always`` the HW moves with the fsyncs, so between
    the marker's write and its fsync a read_committed Fetch gets nothing of the transaction, and
    ListOffsets(read_committed) the transaction's first offset. (The marker is written here as
    the transaction coordinator writes it, and its fsync started only when the test says.)"""
    async def scenario(api):
        await api.create_topic("t")
        pid, epoch = await api.begin("tx", [P0])
        await _produce_txn(api, pid, epoch, [b"a", b"b"])
        part = api.partition("t")

        async def data_durable():
            return part.log.high_watermark == 2

        await wait_until(data_durable, "the data batch's fsync")
        assert part.append_marker(pid, epoch, False, 0, 2000) == 2  # written; no flush round asked
        f = await api.fetch("t", isolation_level=READ_COMMITTED)
        assert (f.high_watermark, f.last_stable_offset, records_of(f.records)) == (2, 0, [])
        assert (await api.list_offsets("t", isolation_level=READ_COMMITTED)).offset == 0
        await api.broker.partitions.flusher.mark(part.log, wait=True)
        p = await settled(api, "t")
        assert (p.high_watermark, p.last_stable_offset) == (3, 3)
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]
        assert _values(committed_view(p)) == []

    run(tmp_path, scenario, fsync=FsyncPolicy.parse("always"))


# The edge table (oncelog.apis._txn.PRODUCER_FENCED_SINCE): EndTxn answers a fenced epoch
# PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before, as Kafka does for older clients.
@pytest.mark.parametrize("version, code", [
    (0, E.invalid_producer_epoch), (1, E.invalid_producer_epoch),
    (2, E.producer_fenced), (3, E.producer_fenced), (4, E.producer_fenced), (5, E.producer_fenced),
])
def test_end_txn_with_a_stale_epoch_is_fenced_with_the_code_of_its_version(tmp_path, version, code):
    async def scenario(api):
        await api.create_topic("t")
        pid, old_epoch = await api.producer("tx")
        pid_again, epoch = await api.producer("tx")  # a new instance
        assert (pid_again, epoch) == (pid, old_epoch + 1)
        await api.add_partitions("tx", pid, epoch, [P0])
        await _produce_txn(api, pid, epoch, [b"a"])
        for commit in (True, False):
            resp = await api.end_txn("tx", pid, old_epoch, commit=commit, version=version)
            assert resp.error_code == code
        # the zombie changed nothing: the transaction is still open and its owner commits it
        assert api.partition("t").last_stable_offset() == 0
        assert (await api.end_txn("tx", pid, epoch, commit=True, version=version)).error_code == E.none
        assert _values(committed_view(await settled(api, "t"))) == [b"a"]

    run(tmp_path, scenario)


def test_a_new_instance_aborts_the_open_transaction_and_fences_the_old_one(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        pid, epoch = await api.begin("tx", [P0])
        await _produce_txn(api, pid, epoch, [b"zombie"])
        # the new instance: CONCURRENT_TRANSACTIONS (retried by the harness) while the open
        # transaction is fenced and aborted, then a newer epoch
        pid_new, epoch_new = await api.producer("tx")
        assert pid_new == pid and epoch_new > epoch
        resp = await api.end_txn("tx", pid, epoch, commit=True)
        assert resp.error_code == E.producer_fenced
        late = await api.produce("t", batch([b"late"], pid=pid, epoch=epoch, seq=1, transactional=True),
                                 transactional_id="tx")
        assert late.error_code == E.invalid_producer_epoch
        p = await settled(api, "t")
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]
        assert committed_view(p) == []

    run(tmp_path, scenario)


def test_end_txn_for_an_unknown_transactional_id_or_producer(tmp_path):
    async def scenario(api):
        resp = await api.end_txn("nobody", 4242, 0, commit=True)
        assert (resp.error_code, len(api.broker.txn)) == (E.invalid_producer_id_mapping, 0)
        pid, epoch = await api.producer("tx")
        resp = await api.end_txn("tx", pid + 1, epoch, commit=True)  # another producer's id
        assert resp.error_code == E.invalid_producer_id_mapping

    run(tmp_path, scenario)


def test_end_txn_with_no_transaction_open(tmp_path):
    async def scenario(api):
        pid, epoch = await api.producer("tx")
        for commit in (True, False):
            resp = await api.end_txn("tx", pid, epoch, commit=commit, version=3)
            assert resp.error_code == E.invalid_txn_state
        # transaction version 2 lets a producer abort with nothing open (and bumps the epoch)
        resp = await api.end_txn("tx", pid, epoch, commit=False, version=5)
        assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (E.none, pid, epoch + 1)
        resp = await api.end_txn("tx", pid, epoch + 1, commit=True, version=5)
        assert resp.error_code == E.invalid_txn_state

    run(tmp_path, scenario)


def test_a_retried_end_txn_is_answered_again_and_the_opposite_outcome_refused(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        pid, epoch = await api.begin("tx", [P0])
        await _produce_txn(api, pid, epoch, [b"a"])
        assert (await api.end_txn("tx", pid, epoch, commit=True)).error_code == E.none
        await settled(api, "t")
        end = api.log_end("t")
        assert (await api.end_txn("tx", pid, epoch, commit=True)).error_code == E.none  # a retry
        assert (await api.end_txn("tx", pid, epoch, commit=False)).error_code == E.invalid_txn_state
        assert api.log_end("t") == end  # no second marker
        assert api.broker.txn.describe("tx").state.kafka_name == "CompleteCommit"

    run(tmp_path, scenario)


def test_end_txn_v5_bumps_the_epoch_so_the_old_one_cannot_touch_the_next_transaction(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        pid, epoch = await api.producer("tx")
        await _produce_txn(api, pid, epoch, [b"a"], version=12)  # Produce v12 adds the partition
        resp = await api.end_txn("tx", pid, epoch, commit=True, version=5)
        assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (E.none, pid, epoch + 1)
        await settled(api, "t")
        # a retry of that EndTxn (old epoch) is answered again, with the new epoch
        resp = await api.end_txn("tx", pid, epoch, commit=True, version=5)
        assert (resp.error_code, resp.producer_epoch) == (E.none, epoch + 1)
        # the next transaction runs at the new epoch; a late batch of the old epoch is refused
        await _produce_txn(api, pid, epoch + 1, [b"b"], version=12)
        late = await api.produce("t", batch([b"late"], pid=pid, epoch=epoch, seq=1, transactional=True),
                                 transactional_id="tx", version=12)
        assert late.error_code == E.invalid_producer_epoch
        # and a late EndTxn(abort) of the old epoch cannot abort it (KAFKA-17754): fenced
        resp = await api.end_txn("tx", pid, epoch, commit=False, version=5)
        assert resp.error_code == E.producer_fenced
        assert (await api.end_txn("tx", pid, epoch + 1, commit=True, version=5)).error_code == E.none
        assert _values(committed_view(await settled(api, "t"))) == [b"a", b"b"]

    run(tmp_path, scenario)
