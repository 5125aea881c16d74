"""The Partition append path in-process (no sockets): client batches, markers, internal-topic
writes, replay after a restart, and DeleteRecords / retention trimming the partition's state."""

from __future__ import annotations

from tests.broker_parts import open_parts

import asyncio
import os

import pytest

from oncelog import errors
from oncelog.partition import AppendOrigin, Partition, PartitionManager
from oncelog.partition.internal_topic import InternalTopic
from oncelog.protocol import records as rb
from oncelog.config.settings import FsyncPolicy
from oncelog.config.settings import LogConfig
from oncelog.storage.partition_log import PartitionLog

PID, EPOCH = 1000, 0


def open_partition(path, config=None, *, internal=False, clean=False, sync_hw=False) -> Partition:
    plog = PartitionLog.open(str(path), "t", 0, config or LogConfig(), sync_hw=sync_hw, recovery_point=None,
                             clean_shutdown=clean)
    return Partition.open(plog, internal=internal)


def batch(seq=0, count=1, *, pid=PID, epoch=EPOCH, transactional=False, value=b"v", ts=1000) -> bytes:
    return rb.build_batch([(b"k", value)] * count, timestamp_ms=ts, producer_id=pid, producer_epoch=epoch,
                          base_sequence=seq, attributes=rb.ATTR_TRANSACTIONAL if transactional else 0)


def append(partition, data, **kwargs):
    return partition.append(data, now_ms=kwargs.pop("now_ms", 1000), **kwargs)


def flush(partition):
    """What the flusher does (retention leaves rolled segments alone until they are fsynced)."""
    segments, offset = partition.log.take_flush_work()
    for seg in segments:
        seg.flush()
    partition.log.flushed(offset)


# ---------------------------------------------------------------------- client batches


def test_client_batches_get_offsets_and_a_retry_is_answered_from_the_producer_state(tmp_path):
    p = open_partition(tmp_path)
    first = append(p, batch(seq=0, count=3))
    assert (first.first_offset, first.last_offset, first.duplicate) == (0, 2, False)
    assert append(p, batch(seq=3, count=2)).first_offset == 3
    retry = append(p, batch(seq=3, count=2))
    assert (retry.first_offset, retry.last_offset, retry.duplicate) == (3, 4, True)
    assert p.log.log_end_offset == 5  # the retry was not written again
    with pytest.raises(errors.OutOfOrderSequence):
        append(p, batch(seq=9))
    with pytest.raises(errors.InvalidProducerEpoch):
        append(p, batch(seq=0, epoch=EPOCH - 1))
    assert p.log.log_end_offset == 5


@pytest.mark.parametrize("records, error", [
    (None, errors.InvalidRecord),
    (b"\x00" * 10, errors.CorruptMessage),
    (rb.build_control_batch(PID, EPOCH, True, 0, 1000), errors.InvalidRecord),
    (batch(value=b"x" * 2000), errors.MessageTooLarge),
], ids=["null", "torn", "control", "too-large"])
def test_client_batches_are_validated_against_the_topic_config_before_anything_is_written(tmp_path, records,
                                                                                         error):
    p = open_partition(tmp_path, LogConfig(max_message_bytes=1000))
    with pytest.raises(error):
        append(p, records)
    assert p.log.log_end_offset == 0 and p.producers.producers == {}


def test_checks_that_need_the_request_or_the_records(tmp_path):
    p = open_partition(tmp_path / "isr", LogConfig(min_insync_replicas=2))
    # min.insync.replicas is capped at the replication factor (Kafka's effectiveMinIsr)
    assert append(p, batch(), acks=-1).first_offset == 0
    assert append(p, batch(seq=1), acks=1).first_offset == 1
    compacted = open_partition(tmp_path / "compacted", LogConfig(cleanup_policy="compact"))
    keyless = rb.build_batch([(b"k", b"v"), (None, b"v")], timestamp_ms=1000)
    with pytest.raises(errors.InvalidRecord) as refused:
        append(compacted, keyless)
    assert [index for index, _ in refused.value.record_errors] == [1]
    assert compacted.log.log_end_offset == 0


def test_clients_may_not_write_to_internal_topics(tmp_path):
    p = open_partition(tmp_path, internal=True)
    with pytest.raises(errors.InvalidTopic):
        append(p, batch())
    assert append(p, batch(pid=-1, seq=-1), origin=AppendOrigin.COORDINATOR).first_offset == 0


def test_transactional_batches_are_verified_before_the_write(tmp_path):
    p = open_partition(tmp_path)
    seen = []

    def refuse(partition, header):
        seen.append((header.producer_id, header.producer_epoch))
        raise errors.InvalidTxnState("not in the transaction")

    with pytest.raises(errors.InvalidTxnState):
        append(p, batch(transactional=True), verify_txn=refuse)
    assert seen == [(PID, EPOCH)] and p.log.log_end_offset == 0
    append(p, batch(pid=7), verify_txn=refuse)  # not transactional: not asked
    assert seen == [(PID, EPOCH)]


# ---------------------------------------------------------------------- markers and the LSO


def test_markers_close_transactions_and_aborts_are_indexed(tmp_path):
    p = open_partition(tmp_path)
    append(p, batch(pid=7, seq=0, count=2))  # 0-1, not transactional
    append(p, batch(seq=0, count=3, transactional=True))  # 2-4
    assert p.last_stable_offset() == 2
    assert p.append_marker(PID, EPOCH, False, 0, 2000) == 5
    assert p.last_stable_offset() == p.log.high_watermark == 6
    assert p.aborted_between(0, 6) == [(PID, 2)]
    assert p.aborted.entries[0].last_stable_offset == 6  # nothing else open: the offset after the marker
    append(p, batch(seq=3, count=1, transactional=True))  # 6
    assert p.append_marker(PID, EPOCH, True, 0, 3000) == 7
    assert p.aborted_between(6, 8) == []  # a commit is not indexed
    assert p.producers.producers[PID].current_txn_first_offset == -1


def test_the_lso_is_the_first_offset_of_the_oldest_open_transaction(tmp_path):
    p = open_partition(tmp_path)
    append(p, batch(pid=1, seq=0, transactional=True))  # 0
    append(p, batch(pid=2, seq=0, transactional=True))  # 1
    p.append_marker(2, EPOCH, False, 0, 2000)  # 2: pid 2 aborts while pid 1 is open
    assert p.last_stable_offset() == 0
    assert p.aborted.entries[0].last_stable_offset == 0
    p.append_marker(1, EPOCH, True, 0, 2000)  # 3
    assert p.last_stable_offset() == 4


def test_an_ended_transaction_holds_the_lso_until_its_marker_is_below_the_high_watermark(tmp_path):
    """Kafka's unreplicatedTxns: with the HW moved by fsyncs (flush.messages=1), a transaction
    whose marker is written but not yet durable still bounds the LSO, so a read_committed reader
    does not read its records before it can read its outcome; the aborted index has the entry at
    once (its lastStableOffset counts open transactions only, as Kafka's)."""
    p = open_partition(tmp_path, sync_hw=True)
    append(p, batch(pid=1, seq=0, count=2, transactional=True))  # 0-1
    append(p, batch(pid=2, seq=0, transactional=True))  # 2
    flush(p)
    assert p.log.high_watermark == 3 and p.last_stable_offset() == 0
    assert p.append_marker(1, EPOCH, False, 0, 2000) == 3  # pid 1 aborts; its marker is not durable yet
    assert p.aborted.entries[-1].last_stable_offset == 2  # pid 2's transaction is still open
    assert p.last_stable_offset() == 0  # 2 (pid 2's first offset) if ended transactions did not count
    assert p.append_marker(2, EPOCH, True, 0, 2000) == 4
    assert p.last_stable_offset() == 0  # 3 (the HW), with the aborted records below it, if they did not
    flush(p)  # both markers durable: the HW passes them and neither transaction holds the LSO
    assert p.log.high_watermark == 5 and p.last_stable_offset() == 5
    assert p.producers.unreplicated == {}
    # Many transactions ended before the HW moves: the set is pruned as the HW passes them.
    for i in range(50):
        append(p, batch(pid=3, seq=i, transactional=True))
        p.append_marker(3, EPOCH, True, 0, 2000)
    assert len(p.producers.unreplicated) == 50 and p.last_stable_offset() == 5
    flush(p)
    assert p.last_stable_offset() == p.log.high_watermark == 105
    assert p.producers.unreplicated == {}


def test_marker_with_a_newer_epoch_resets_the_sequence(tmp_path):
    p = open_partition(tmp_path)
    append(p, batch(seq=0, count=2, transactional=True))
    p.append_marker(PID, EPOCH + 1, False, 0, 2000)  # the coordinator fenced the producer (epoch bump)
    with pytest.raises(errors.InvalidProducerEpoch):
        append(p, batch(seq=2, transactional=True))
    assert append(p, batch(seq=0, epoch=EPOCH + 1)).first_offset == 3


# ---------------------------------------------------------------------- internal topics


def test_coordinator_writes_without_sequences_open_and_close_transactions(tmp_path):
    p = open_partition(tmp_path, internal=True)
    # A transactional offset commit: the broker's own batch, no sequence numbers.
    append(p, batch(seq=-1, transactional=True), origin=AppendOrigin.COORDINATOR)
    append(p, batch(pid=-1, seq=-1), origin=AppendOrigin.COORDINATOR)  # an ordinary offset commit
    assert p.last_stable_offset() == 0
    assert p.producers.producers[PID].batches == type(p.producers.producers[PID].batches)()  # not sequenced
    p.append_marker(PID, EPOCH, True, 0, 2000)
    assert p.last_stable_offset() == 3


def test_internal_topic_appends_through_the_partition(tmp_path):
    async def run():
        parts = open_parts(str(tmp_path / "data"), LogConfig())
        logs, manager = parts.logs, parts.partitions
        topic = InternalTopic(manager, "__transaction_state", 1, 1 << 20)
        done = []
        first = topic.append("group", [(b"k", b"v")], done.append, producer_id=PID, producer_epoch=EPOCH,
                             transactional=True)
        assert first == 0 and done == [None]
        partition = manager.get("__transaction_state", 0)
        assert partition.internal and partition.last_stable_offset() == 0  # its transaction is open
        with pytest.raises(errors.InvalidTopic):
            partition.append(batch(pid=-1, seq=-1), now_ms=1000)
        assert [h.base_offset for h, _ in topic.batches(0)] == [0]
        partition.append_marker(PID, EPOCH, False, 0, 2000)
        assert partition.aborted_between(0, 2) == [(PID, 0)]
        await manager.close()

    asyncio.run(run())


# ---------------------------------------------------------------------- restart


def test_state_is_rebuilt_from_the_log_after_a_crash(tmp_path):
    p = open_partition(tmp_path)
    append(p, batch(seq=0, count=2))  # 0-1
    append(p, batch(pid=8, seq=0, transactional=True))  # 2
    append(p, batch(pid=9, seq=0, transactional=True))  # 3
    p.append_marker(9, EPOCH, False, 0, 2000)  # 4
    # A crash: no close, no snapshot. And the aborted index is lost too.
    os.unlink(p.aborted.path)
    again = open_partition(tmp_path)
    assert append(again, batch(seq=0, count=2)).duplicate  # the retry is still recognised
    assert again.last_stable_offset() == 2  # pid 8's transaction is still open
    assert again.aborted_between(0, 5) == [(9, 3)]  # re-created by the replay of its marker
    assert append(again, batch(seq=2)).first_offset == 5


def test_a_clean_close_snapshots_so_the_replay_has_nothing_to_do(tmp_path):
    p = open_partition(tmp_path)
    append(p, batch(seq=0, transactional=True))
    p.append_marker(PID, EPOCH, False, 0, 2000)
    p.close()
    p.log.close()
    assert os.path.exists(tmp_path / f"{2:020d}.snapshot")
    again = open_partition(tmp_path, clean=True)
    assert again.aborted_between(0, 2) == [(PID, 0)]
    assert append(again, batch(seq=1)).first_offset == 2


def test_a_roll_snapshots_the_producer_state(tmp_path):
    p = open_partition(tmp_path, LogConfig(segment_bytes=300))
    for seq in range(6):
        append(p, batch(seq=seq, value=b"x" * 100))
    bases = [s.base_offset for s in p.log.segments]
    assert len(bases) > 1
    snapshots = sorted(n for n in os.listdir(tmp_path) if n.endswith(".snapshot"))
    assert snapshots and snapshots[-1] == f"{bases[-1]:020d}.snapshot"


# ---------------------------------------------------------------------- DeleteRecords and retention


def test_delete_records_trims_the_aborted_index_and_keeps_the_producer(tmp_path):
    p = open_partition(tmp_path, LogConfig(segment_bytes=300))
    append(p, batch(pid=9, seq=0, transactional=True))  # 0
    p.append_marker(9, EPOCH, False, 0, 2000)  # 1
    for seq in range(4):
        append(p, batch(seq=seq, value=b"x" * 100))  # 2..5
    assert p.aborted_between(0, 6) == [(9, 0)]
    with pytest.raises(errors.OffsetOutOfRangeError):
        p.delete_records(p.log.high_watermark + 1)
    assert p.delete_records(6) == 6  # every batch of both producers is gone
    assert p.aborted.entries == [] and p.aborted_between(0, 6) == []
    # The producers outlive their batches (as in Kafka), across a restart too.
    assert append(p, batch(seq=4)).first_offset == 6
    p.log.close()
    again = open_partition(tmp_path)
    assert append(again, batch(seq=5)).first_offset == 7
    assert again.log.log_start_offset == 6 and again.aborted_between(0, 8) == []


def test_retention_returns_the_new_log_start_and_the_partition_trims(tmp_path):
    p = open_partition(tmp_path, LogConfig(segment_bytes=300, retention_ms=1000))
    append(p, batch(pid=9, seq=0, transactional=True, ts=1000))  # 0
    p.append_marker(9, EPOCH, False, 0, 1000)  # 1
    for seq, ts in enumerate((1000, 1000, 50_000)):
        append(p, batch(seq=seq, value=b"x" * 150, ts=ts), now_ms=ts)
    flush(p)
    before = p.log.log_start_offset
    start = p.apply_retention(now_ms=10_000)
    assert start == p.log.log_start_offset > before
    assert start > 1 and p.aborted.entries == []  # the ABORT marker at 1 went with its segment


# ---------------------------------------------------------------------- the manager


def test_the_manager_hands_out_one_partition_per_log_and_forgets_deleted_topics(tmp_path):
    async def run():
        parts = open_parts(str(tmp_path / "data"), LogConfig())
        logs, manager = parts.logs, parts.partitions
        parts.metadata.topics.create_topic("t", 2)
        p = manager.get("t", 1)
        assert manager.get("t", 1) is p and p.name == "t-1" and not p.internal
        with pytest.raises(errors.UnknownTopicOrPartition):
            manager.get("t", 2)
        append(p, batch(transactional=True))
        await parts.metadata.topics.delete_topic("t")
        with pytest.raises(errors.UnknownTopicOrPartition):
            manager.get("t", 1)
        parts.metadata.topics.create_topic("t", 1)
        fresh = manager.get("t", 0)
        assert fresh.last_stable_offset() == 0 and fresh.log.log_end_offset == 0
        await manager.close()

    asyncio.run(run())


# ---------------------------------------------------------------------- producer-id expiry across restarts

def _manager(path, now: list, expiration_ms: int):
    parts = open_parts(str(path), LogConfig(segment_bytes=400),
                      static={"producer.id.expiration.ms": str(expiration_ms)}, clock=lambda: now[0])
    return parts, parts.partitions


@pytest.mark.parametrize("clean", [True, False])
def test_an_expired_producer_is_not_brought_back_by_a_restart(tmp_path, clean):
    # A partition's state is rebuilt from its newest snapshot and the batches after it; both may
    # name a producer that expired meanwhile (the snapshot of a roll or of the clean stop, the
    # batches after it after a SIGKILL): it stays expired, as Kafka's loadFromSnapshot skips it.
    async def run():
        now = [10_000]
        parts, manager = _manager(tmp_path / "data", now, expiration_ms=5000)
        logs = parts.logs
        parts.metadata.topics.create_topic("t", 1)
        p = manager.get("t", 0)
        for seq in range(3):  # rolls (400-byte segments): snapshots name producers 1 and 2
            append(p, batch(pid=1, seq=seq, value=b"x" * 150, ts=now[0]), now_ms=now[0])
        now[0] += 4000
        append(p, batch(pid=2, seq=0, ts=now[0]), now_ms=now[0])  # 14 s: producer 2 is 1 s old later
        now[0] += 2000  # 16 s: producer 1 idle 6 s (expired), producer 2 idle 2 s
        assert manager.expire_producers() == 1 and sorted(p.producers.producers) == [2]
        if clean:
            await manager.close()  # snapshots at the log end: producer 2 only
        else:
            logs.flusher._dirty.clear()  # SIGKILL: no close, the last snapshot (a roll's) names producer 1
            for plog in logs.all_logs():
                plog.close()
        _, manager2 = _manager(tmp_path / "data", now, expiration_ms=5000)
        assert sorted(manager2.get("t", 0).producers.producers) == [2]
        now[0] += 5000  # 21 s: producer 2 idle 7 s; a restart now drops it at open, before any check
        await manager2.close()
        _, manager3 = _manager(tmp_path / "data", now, expiration_ms=5000)
        assert manager3.get("t", 0).producers.producers == {}
        await manager3.close()

    asyncio.run(run())


def test_the_check_runs_every_producer_id_expiration_check_interval(tmp_path):
    async def run():
        now = [10_000]
        parts = open_parts(str(tmp_path / "data"), LogConfig(),
                          static={"producer.id.expiration.ms": "1000",
                                  "producer.id.expiration.check.interval.ms": "50"}, clock=lambda: now[0])
        logs, manager = parts.logs, parts.partitions
        parts.metadata.topics.create_topic("t", 1)
        p = manager.get("t", 0)
        append(p, batch(pid=1, ts=now[0]), now_ms=now[0])
        manager.start_background()
        now[0] += 1000
        for _ in range(100):
            await asyncio.sleep(0.02)
            if not p.producers.producers:
                break
        assert p.producers.producers == {}
        await manager.close()

    asyncio.run(run())
