"""Fetch (key 1) against an in-process broker: isolation levels around open and aborted
transactions, offsets out of range, byte limits (KIP-74), topic ids, sessions and long polls."""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid

from .harness import (E, READ_COMMITTED, READ_UNCOMMITTED, batch, committed_view, records_of, request_module, run,
                      wait_until)

FETCH_KEY, LIST_OFFSETS_KEY = 1, 2


async def _log_with_open_transaction(api):
    """t-0: a, b (plain) | t1 t2 t3 (transaction of "tx", open) | c (plain): offsets 0-5."""
    await api.create_topic("t")
    assert (await api.produce("t", batch([b"a", b"b"]))).base_offset == 0
    pid, epoch = await api.begin("tx", [("t", 0)])
    txn = await api.produce("t", batch([b"t1", b"t2", b"t3"], pid=pid, epoch=epoch, seq=0, transactional=True),
                            transactional_id="tx")
    assert (txn.error_code, txn.base_offset) == (E.none, 2)
    assert (await api.produce("t", batch([b"c"]))).base_offset == 5
    return pid, epoch


def _values(records):
    return [r.value for r in records]


def test_read_committed_stops_at_the_last_stable_offset_of_an_open_transaction(tmp_path):
    async def scenario(api):
        await _log_with_open_transaction(api)
        uncommitted = await api.fetch("t", 0, isolation_level=READ_UNCOMMITTED)
        assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (6, 2)
        assert [r.offset for r in records_of(uncommitted.records)] == [0, 1, 2, 3, 4, 5]
        assert uncommitted.aborted_transactions is None  # only read_committed fetches get the list

        committed = await api.fetch("t", 0, isolation_level=READ_COMMITTED)
        assert (committed.error_code, committed.high_watermark, committed.last_stable_offset) == (E.none, 6, 2)
        assert _values(records_of(committed.records)) == [b"a", b"b"]  # not even the plain "c" after it
        assert not committed.aborted_transactions
        # at the LSO, and inside the open transaction: nothing yet, and not an error
        for offset in (2, 4, 6):
            at = await api.fetch("t", offset, isolation_level=READ_COMMITTED)
            assert (at.error_code, at.records or b"") == (E.none, b"")

    run(tmp_path, scenario)


def test_after_an_abort_read_committed_lists_the_aborted_transaction(tmp_path):
    async def scenario(api):
        pid, epoch = await _log_with_open_transaction(api)
        assert (await api.end_txn("tx", pid, epoch, commit=False)).error_code == E.none
        # the ABORT marker (offset 6) moves the LSO once it is durable
        p = await wait_until(lambda: _fetch_if(api, lambda p: p.last_stable_offset == 7, isolation_level=READ_COMMITTED),
                             "the ABORT marker to become stable")
        assert (p.high_watermark, p.last_stable_offset) == (7, 7)
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 2)]
        # the batches come back as stored; the consumer drops the aborted ones by that list
        records = records_of(p.records)
        assert [r.offset for r in records] == [0, 1, 2, 3, 4, 5, 6]
        assert records[-1].control is not None and records[-1].producer_id == pid
        assert _values(committed_view(p)) == [b"a", b"b", b"c"]
        # a fetch starting inside the aborted range still names the transaction
        later = await api.fetch("t", 4, isolation_level=READ_COMMITTED)
        assert [(a.producer_id, a.first_offset) for a in later.aborted_transactions] == [(pid, 2)]
        # a fetch after its marker does not
        after = await api.fetch("t", 7, isolation_level=READ_COMMITTED)
        assert not after.aborted_transactions
        # read_uncommitted sees everything and gets no list
        uncommitted = await api.fetch("t", 0)
        assert uncommitted.aborted_transactions is None
        assert _values(r for r in records_of(uncommitted.records) if r.control is None) == [
            b"a", b"b", b"t1", b"t2", b"t3", b"c"]

    run(tmp_path, scenario)


async def _fetch_if(api, condition, topic="t", offset=0, **kwargs):
    p = await api.fetch(topic, offset, **kwargs)
    return p if condition(p) else None


def test_a_fetch_offset_outside_the_log_is_offset_out_of_range(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        await api.produce("t", batch([b"a", b"b"]))
        for offset in (3, 100, -1):
            p = await api.fetch("t", offset)
            assert (p.error_code, p.records or b"") == (E.offset_out_of_range, b""), offset
            # Kafka's error partition: -1 offsets (the client asks ListOffsets where to go)
            assert (p.high_watermark, p.last_stable_offset, p.log_start_offset) == (-1, -1, -1)
        # at the high watermark: nothing to read yet, which is not an error
        p = await api.fetch("t", 2)
        assert (p.error_code, p.records or b"") == (E.none, b"")
        # an error in one partition does not spoil the others
        resp = await api.fetch_request({("t", 0): 0, ("u", 0): 0})
        codes = {t.topic: t.partitions[0].error_code for t in resp.responses}
        assert codes == {"t": E.none, "u": E.unknown_topic_or_partition}

    run(tmp_path, scenario)


def test_max_bytes_returns_at_least_one_whole_batch_and_never_part_of_one(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        await api.create_topic("u")
        sizes = []
        for i in range(3):
            data = batch([bytes([65 + i]) * 1000])
            sizes.append(len(data))
            await api.produce("t", data)
        await api.produce("u", batch([b"u" * 1000]))
        # a limit smaller than the first batch: that batch anyway, whole (KIP-74)
        for limit in dict(max_bytes=10, partition_max_bytes=10).items():
            p = await api.fetch("t", 0, **dict([limit]))
            assert len(p.records) == sizes[0], limit
            assert [r.offset for r in records_of(p.records)] == [0]
        # a limit between one and two batches: only whole batches
        p = await api.fetch("t", 0, max_bytes=sizes[0] + sizes[1] - 1)
        assert [r.offset for r in records_of(p.records)] == [0]
        p = await api.fetch("t", 0, max_bytes=sizes[0] + sizes[1])
        assert [r.offset for r in records_of(p.records)] == [0, 1]
        # only the first partition with data may exceed the limit: the next one gets nothing
        resp = await api.fetch_request({("t", 0): 0, ("u", 0): 0}, max_bytes=10)
        got = {t.topic: records_of(t.partitions[0].records) for t in resp.responses}
        assert [r.offset for r in got["t"]] == [0] and got["u"] == []
        assert {t.topic: t.partitions[0].error_code for t in resp.responses} == {"t": E.none, "u": E.none}

    run(tmp_path, scenario)


def test_fetch_v13_names_topics_by_id(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        await api.produce("t", batch([b"a"]))
        resp = await api.fetch_request({("t", 0): 0}, version=13)
        [t] = resp.responses
        assert t.topic_id == api.broker.metadata.topics.get("t").topic_id
        assert _values(records_of(t.partitions[0].records)) == [b"a"]
        stranger = uuid.uuid4()
        resp = await api.fetch_request({(stranger, 0): 0}, version=13)
        [t] = resp.responses
        assert (t.topic_id, t.partitions[0].error_code) == (stranger, E.unknown_topic_id)

    run(tmp_path, scenario)


def test_a_fetch_session_is_not_kept(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        resp = await api.fetch_request({("t", 0): 0}, session_id=7)
        assert (resp.error_code, resp.session_id, resp.responses) == (E.fetch_session_id_not_found, 0, ())
        resp = await api.fetch_request({("t", 0): 0})
        assert (resp.error_code, resp.session_id) == (E.none, 0)  # 0: no session was created

    run(tmp_path, scenario)


def test_a_long_poll_is_answered_when_data_arrives_or_when_max_wait_passes(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        started = time.monotonic()
        waiting = asyncio.ensure_future(api.fetch_request({("t", 0): 0}, min_bytes=1, max_wait_ms=3000))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await api.produce("t", batch([b"a"]))
        resp = await waiting
        assert time.monotonic() - started < 2
        assert _values(records_of(resp.responses[0].partitions[0].records)) == [b"a"]
        # nothing arrives: an empty answer after max_wait
        started = time.monotonic()
        resp = await api.fetch_request({("t", 0): 1}, min_bytes=1, max_wait_ms=150)
        assert time.monotonic() - started >= 0.14
        assert (resp.responses[0].partitions[0].error_code, resp.responses[0].partitions[0].records or b"") == (
            E.none, b"")

    run(tmp_path, scenario)


def test_long_polls_that_time_out_leave_no_waiter_behind_on_an_idle_partition(tmp_path):
    """Only an append empties a log's waiters: each long poll that times out takes its own back,
    so a consumer polling an idle partition for weeks does not grow the list (it did: one future
    per poll, freed only by the next append)."""
    async def scenario(api):
        await api.create_topic("t")
        plog = api.broker.partitions.get("t", 0).log
        for _ in range(20):
            await api.fetch_request({("t", 0): 0}, min_bytes=1, max_wait_ms=5)
        assert plog.waiters == []
        waiting = asyncio.ensure_future(api.fetch_request({("t", 0): 0}, min_bytes=1, max_wait_ms=3000))
        await asyncio.sleep(0.05)
        assert len(plog.waiters) == 1  # the one waiting poll, woken by the append below
        await api.produce("t", batch([b"a"]))
        await waiting
        assert plog.waiters == []

    run(tmp_path, scenario)


# ---------------------------------------------------------------------- leader epochs (KIP-320)
# The one leader's epoch is 0; Kafka's Partition.checkCurrentLeaderEpoch and readRecords.


async def _fetch_epochs(api, offset, *, current=-1, last=-1):
    m = request_module(FETCH_KEY, 12)
    resp = await api.call(FETCH_KEY, 12, m.FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, topics=(m.FetchTopic(topic="t", partitions=(m.FetchPartition(
            partition=0, current_leader_epoch=current, fetch_offset=offset, last_fetched_epoch=last,
            log_start_offset=-1, partition_max_bytes=1 << 20),)),), forgotten_topics_data=(), rack_id=""))
    return resp.responses[0].partitions[0]


async def _list_offsets_epoch(api, current):
    return await api.list_offsets("t", current_leader_epoch=current)


def test_a_current_leader_epoch_other_than_the_leaders_is_refused(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        await api.produce("t", batch([b"a", b"b"]))
        assert (await _fetch_epochs(api, 0, current=0)).error_code == E.none
        p = await _fetch_epochs(api, 0, current=7)
        assert (p.error_code, p.high_watermark) == (E.unknown_leader_epoch, -1)
        assert (await _fetch_epochs(api, 0, current=-2)).error_code == E.none  # Fetch: negative = none
        assert (await _list_offsets_epoch(api, 0)).offset == 2
        assert (await _list_offsets_epoch(api, 7)).error_code == E.unknown_leader_epoch
        assert (await _list_offsets_epoch(api, -2)).error_code == E.fenced_leader_epoch

    run(tmp_path, scenario)


def test_last_fetched_epoch_is_checked_against_the_one_epoch(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        await api.produce("t", batch([b"a", b"b"]))
        p = await _fetch_epochs(api, 1, last=0)
        assert (p.error_code, p.diverging_epoch.epoch) == (E.none, -1) and p.records
        p = await _fetch_epochs(api, 5, last=0)  # past the log end: the epoch's end instead of an error
        assert (p.error_code, p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (E.none, 0, 2)
        assert not p.records
        assert (await _fetch_epochs(api, 1, last=3)).error_code == E.offset_out_of_range  # an epoch never seen

    run(tmp_path, scenario)


def test_a_partition_named_twice_counts_once(tmp_path):
    # Fetch: the last entry counts (a LinkedHashMap); ListOffsets: INVALID_REQUEST, answered once
    async def scenario(api):
        await api.create_topic("t")
        await api.produce("t", batch([b"a", b"b"]))
        await api.produce("t", batch([b"c"]))
        m = request_module(FETCH_KEY, 12)
        part = lambda offset: m.FetchPartition(  # noqa: E731
            partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=1 << 20)
        resp = await api.call(FETCH_KEY, 12, m.FetchRequest(
            replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20, isolation_level=0,
            session_id=0, session_epoch=-1, topics=(m.FetchTopic(topic="t", partitions=(part(0), part(2))),),
            forgotten_topics_data=(), rack_id=""))
        [p] = resp.responses[0].partitions
        assert [r.offset for r in records_of(p.records)] == [2]
        lm = request_module(LIST_OFFSETS_KEY, 7)
        lp = lm.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)
        listed = await api.call(LIST_OFFSETS_KEY, 7, lm.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
            lm.ListOffsetsTopic(name="t", partitions=(lp, lp)),)))
        assert [(p.error_code, p.offset) for p in listed.topics[0].partitions] == [(E.invalid_request, -1)]

    run(tmp_path, scenario)



def test_a_fetch_naming_no_partition_is_answered_at_once(tmp_path):
    """A Fetch that names no partition is answered at once, whatever its min_bytes and max_wait,
    as Kafka answers it (KafkaApis.handleFetchRequest with no partition to read;
    ReplicaManager.fetchMessages' ``fetchInfos.isEmpty``). It is what a Java consumer sends on
    close to end its fetch session (FetchSessionHandler.notifyClose: epoch -1, no partitions,
    min_bytes 1, max_wait fetch.max.wait.ms), and its close waits for the answer: long-polled to
    max_wait, it held every Java consumer's close 500 ms, and each stop of a Kafka Connect
    worker's internal-topic readers (tests/kafka/test_kafka_connect.py) with it."""
    async def scenario(api):
        await api.create_topic("t")
        for version in (12, 13, 17):
            started = time.monotonic()
            resp = await api.fetch_request({}, min_bytes=1, max_wait_ms=3000, version=version)
            assert time.monotonic() - started < 1.5, f"v{version} was long-polled"
            assert (resp.error_code, resp.session_id, resp.responses) == (E.none, 0, ())

    run(tmp_path, scenario)
