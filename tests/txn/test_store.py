"""The ``__transaction_state`` side of expiry (:mod:`oncelog.txn.store`), over a real partition
manager in-process: a sweep's tombstones are written per partition in batches no larger than
``max.message.bytes``, each batch answered once, and a replay applies them."""

from __future__ import annotations

from tests.broker_parts import open_parts

import asyncio

from oncelog.config.settings import FsyncPolicy, LogConfig
from oncelog.partition.internal_topic import partition_for
from oncelog.txn.records import encode_key
from oncelog.txn.store import TransactionStateTopic


class Loaded:
    def __init__(self):
        self.loaded = []

    def load(self, txn_id, m):
        self.loaded.append((txn_id, m))


def test_tombstones_are_batched_per_partition_under_max_message_bytes(tmp_path):
    ids = [f"spark-{i:05d}" for i in range(3000)]
    limit = 8192

    async def run():
        parts = open_parts(str(tmp_path / "data"), LogConfig(max_message_bytes=limit))
        logs, manager = parts.logs, parts.partitions
        topic = TransactionStateTopic(manager, 3)
        answered = []
        topic.persist_expired(ids, lambda chunk, error: answered.append((chunk, error)))
        assert sorted(t for chunk, _ in answered for t in chunk) == ids  # each id answered once
        assert all(error is None for _, error in answered)
        for chunk, _ in answered:  # each answer is one partition's
            assert len({partition_for(t, 3) for t in chunk}) == 1
        sizes = [(header.record_count, len(data)) for p in range(3) for header, data in topic.batches(p)]
        assert len(sizes) == len(answered) < len(ids) / 100  # a batch per answer, far fewer than ids
        assert all(size <= limit for _, size in sizes) and sum(n for n, _ in sizes) == len(ids)
        coordinator = Loaded()
        assert topic.replay(coordinator) == len(ids)  # every tombstone read, no id loaded
        assert coordinator.loaded == []
        await manager.close()

    asyncio.run(run())


def test_a_tombstone_batch_holds_records_of_its_partition_only(tmp_path):
    async def run():
        parts = open_parts(str(tmp_path / "data"), LogConfig())
        logs, manager = parts.logs, parts.partitions
        topic = TransactionStateTopic(manager, 10)
        ids = [f"t{i}" for i in range(40)]
        topic.persist_expired(ids, lambda chunk, error: None)
        from oncelog.protocol import records as rb

        for p in range(10):
            for _, data in topic.batches(p):
                keys = [key for _, _, key, value in rb.iter_records(data) if value is None]
                assert keys and all(partition_for(t, 10) == p for t in ids if encode_key(t) in keys)
        await manager.close()

    asyncio.run(run())


def test_the_replay_loads_each_ids_last_record_and_skips_one_it_cannot_read(tmp_path, caplog):
    from oncelog.txn.records import encode_value
    from oncelog.txn.state import TransactionMetadata, TransactionState as T

    def value(txn_id, epoch, state=T.EMPTY):
        return encode_value(TransactionMetadata(txn_id, 7, epoch, 60000, state, last_update_ms=1000 + epoch))

    async def run():
        parts = open_parts(str(tmp_path / "data"), LogConfig())
        logs, manager = parts.logs, parts.partitions
        topic = TransactionStateTopic(manager, 2)
        for txn_id, records in {
            "a": [value("a", 0), b"\xff\xff garbage superseded", value("a", 1)],  # epoch 1 loaded
            "b": [value("b", 0), None, value("b", 5)],  # re-created after its tombstone
            "c": [value("c", 0), None],  # expired
            "d": [value("d", 0), b"\x00\x09 a version this oncelog does not know"],  # left out
        }.items():
            for v in records:
                topic.append(txn_id, [(encode_key(txn_id), v)], lambda _: None)
        coordinator = Loaded()
        assert topic.replay(coordinator) == 10
        assert sorted((t, m.producer_epoch) for t, m in coordinator.loaded) == [("a", 1), ("b", 5)]
        assert "skipping unreadable __transaction_state record" in caplog.text
        await manager.close()

    asyncio.run(run())
