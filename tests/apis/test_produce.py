"""Produce (key 0) against an in-process broker: offsets, acks, idempotence, per-partition errors,
topic configs, and the KIP-890 verification of transactional batches."""

from __future__ import annotations

import pytest

from oncelog.apis._base import CloseConnection
from oncelog.protocol import records as rb

from .harness import E, batch, records_of, run, wait_until


async def _fetch_if_hw(api, topic, hw):
    p = await api.fetch(topic)
    return p if p.high_watermark == hw else None


def test_acks_all_and_acks_one_append_at_consecutive_offsets(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        first = await api.produce("t", batch([b"a", b"b", b"c"]), acks=-1)
        assert (first.error_code, first.base_offset, first.log_start_offset) == (E.none, 0, 0)
        second = await api.produce("t", batch([b"d", b"e"]), acks=1)
        assert (second.error_code, second.base_offset, second.log_start_offset) == (E.none, 3, 0)
        assert api.log_end("t") == 5
        # acks=1 is answered from the page cache; under --fsync always the high watermark (what
        # consumers see) moves only once the flusher's fsync covers the records
        fetched = await wait_until(lambda: _fetch_if_hw(api, "t", 5), "the high watermark at 5")
        assert [(r.offset, r.value) for r in records_of(fetched.records)] == [
            (0, b"a"), (1, b"b"), (2, b"c"), (3, b"d"), (4, b"e")]

    run(tmp_path, scenario)


def test_acks_all_is_answered_once_the_fsync_covering_it_is_done(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        p = await api.produce("t", batch([b"a"]), acks=-1)
        assert p.error_code == E.none
        log = api.partition("t").log
        assert log.flushed_offset >= 1  # durable before the answer, under --fsync always

    run(tmp_path, scenario)


def test_acks_zero_gets_no_response_but_is_appended(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        assert await api.produce_request({("t", 0): batch([b"a", b"b"])}, acks=0) is None
        assert api.log_end("t") == 2
        # an acks=0 request that fails gets no response either, and the connection is closed so the
        # producer refreshes its metadata (Kafka's KafkaApis.handleProduceRequest)
        closing = await api.produce_request({("t", 7): batch([b"c"])}, acks=0)
        assert isinstance(closing, CloseConnection) and "t-7: UNKNOWN_TOPIC_OR_PARTITION" in closing.reason
        assert api.log_end("t") == 2

    run(tmp_path, scenario)


def test_invalid_acks_is_invalid_required_acks(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        p = await api.produce("t", batch([b"a"]), acks=2)
        assert p.error_code == E.invalid_required_acks
        assert api.log_end("t") == 0

    run(tmp_path, scenario)


def test_idempotent_retry_is_answered_with_the_original_offset_and_not_written_again(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        await api.produce("t", batch([b"x"]))  # non-idempotent data first: offsets are not sequences
        pid, epoch = await api.producer()
        first = batch([b"a", b"b"], pid=pid, epoch=epoch, seq=0)
        assert (await api.produce("t", first)).base_offset == 1
        assert (await api.produce("t", batch([b"c"], pid=pid, epoch=epoch, seq=2))).base_offset == 3
        retry = await api.produce("t", first)  # the same bytes again: a retry after a lost answer
        assert (retry.error_code, retry.base_offset) == (E.none, 1)
        assert api.log_end("t") == 4
        # a gap in the sequence: refused, nothing written
        gap = await api.produce("t", batch([b"d"], pid=pid, epoch=epoch, seq=5))
        assert gap.error_code == E.out_of_order_sequence_number
        assert api.log_end("t") == 4
        # the next sequence is still accepted after the refusal
        assert (await api.produce("t", batch([b"d"], pid=pid, epoch=epoch, seq=3))).base_offset == 4
        values = [r.value for r in records_of((await api.fetch("t")).records)]
        assert values == [b"x", b"a", b"b", b"c", b"d"]

    run(tmp_path, scenario)


def test_idempotent_retry_with_acks_one_too(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        pid, epoch = await api.producer()
        data = batch([b"a"], pid=pid, epoch=epoch, seq=0)
        assert (await api.produce("t", data, acks=1)).base_offset == 0
        again = await api.produce("t", data, acks=1)
        assert (again.error_code, again.base_offset) == (E.none, 0)
        assert api.log_end("t") == 1

    run(tmp_path, scenario)


def test_unknown_topic_or_partition_is_refused_per_partition(tmp_path):
    async def scenario(api):
        await api.create_topic("t", partitions=2)
        resp = await api.produce_request({("t", 0): batch([b"ok"]), ("t", 2): batch([b"no"]),
                                          ("nope", 0): batch([b"no"])})
        codes = {(t.name, p.index): (p.error_code, p.base_offset) for t in resp.responses
                 for p in t.partition_responses}
        assert codes == {("t", 0): (E.none, 0), ("t", 2): (E.unknown_topic_or_partition, -1),
                         ("nope", 0): (E.unknown_topic_or_partition, -1)}
        assert "nope" not in api.broker.metadata.topics  # Produce does not create topics

    run(tmp_path, scenario)


def test_a_corrupt_batch_is_refused_and_the_other_partitions_still_written(tmp_path):
    async def scenario(api):
        await api.create_topic("t", partitions=2)
        bad = bytearray(batch([b"value" * 4]))
        bad[-3] ^= 0xFF  # inside a record: covered by the CRC32C
        resp = await api.produce_request({("t", 0): bytes(bad), ("t", 1): batch([b"fine"])})
        codes = {p.index: p.error_code for t in resp.responses for p in t.partition_responses}
        assert codes == {0: E.corrupt_message, 1: E.none}
        assert (api.log_end("t", 0), api.log_end("t", 1)) == (0, 1)

    run(tmp_path, scenario)


def test_a_null_records_field_and_a_client_control_batch_are_invalid_record(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        assert (await api.produce("t", None)).error_code == E.invalid_record
        marker = rb.build_control_batch(1000, 0, True, 0, 0)  # only coordinators write markers
        assert (await api.produce("t", marker)).error_code == E.invalid_record
        assert api.log_end("t") == 0

    run(tmp_path, scenario)


def test_a_batch_above_max_message_bytes_is_message_too_large(tmp_path):
    async def scenario(api):
        await api.create_topic("t", max_message_bytes="1000")
        small = batch([b"s" * 100])
        big = batch([b"b" * 2000])
        assert (await api.produce("t", big)).error_code == E.message_too_large
        assert api.log_end("t") == 0
        # two batches in one records field: Kafka's ProduceRequest.validateRecords (v3+) refuses
        # the partition's whole field before any size check
        assert (await api.produce("t", small + big)).error_code == E.invalid_record
        assert api.log_end("t") == 0
        assert (await api.produce("t", small)).error_code == E.none

    run(tmp_path, scenario)


def test_a_compacted_topic_refuses_a_keyless_record_with_its_record_error(tmp_path):
    async def scenario(api):
        await api.create_topic("c", cleanup_policy="compact")
        p = await api.produce("c", batch([b"a", b"b", b"c"], keys=[b"k1", None, b"k3"]))
        assert p.error_code == E.invalid_record
        assert [e.batch_index for e in p.record_errors] == [1]  # KIP-467: the record's index in its batch
        assert p.error_message
        assert api.log_end("c") == 0
        ok = await api.produce("c", batch([b"a", b"b"], keys=[b"k1", b"k2"]))
        assert (ok.error_code, ok.base_offset, ok.record_errors) == (E.none, 0, ())

    run(tmp_path, scenario)


def test_min_insync_replicas_above_the_replication_factor_is_capped(tmp_path):
    async def scenario(api):
        # Kafka's Partition.effectiveMinIsr: min(min.insync.replicas, replication factor) = 1
        await api.create_topic("t", min_insync_replicas="2")
        assert (await api.produce("t", batch([b"a"]), acks=-1)).error_code == E.none
        assert (await api.produce("t", batch([b"a"]), acks=1)).error_code == E.none
        assert api.log_end("t") == 2

    run(tmp_path, scenario)


def test_clients_cannot_write_to_internal_topics(tmp_path):
    async def scenario(api):
        p = await api.produce("__consumer_offsets", batch([b"a"]))
        assert p.error_code == E.invalid_topic_exception
        assert api.log_end("__consumer_offsets") == 0

    run(tmp_path, scenario)


def test_a_transactional_batch_for_a_partition_not_in_the_transaction_is_refused(tmp_path):
    async def scenario(api):
        await api.create_topic("t", partitions=2)
        pid, epoch = await api.producer("tx")
        data = batch([b"a"], pid=pid, epoch=epoch, seq=0, transactional=True)
        # no transaction open at all
        p = await api.produce("t", data, transactional_id="tx")
        assert p.error_code == E.invalid_txn_state
        # a transaction open on partition 1 only
        assert await api.add_partitions("tx", pid, epoch, [("t", 1)]) == {("t", 1): E.none}
        p = await api.produce("t", data, transactional_id="tx")
        assert p.error_code == E.invalid_txn_state
        assert api.log_end("t", 0) == 0
        assert (await api.produce("t", data, index=1, transactional_id="tx")).error_code == E.none

    run(tmp_path, scenario)


def test_a_transactional_batch_of_a_fenced_epoch_or_unknown_producer_is_refused(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        pid, old_epoch = await api.producer("tx")
        pid_again, epoch = await api.producer("tx")  # a new instance: the old one is fenced
        assert (pid_again, epoch) == (pid, old_epoch + 1)
        assert await api.add_partitions("tx", pid, epoch, [("t", 0)]) == {("t", 0): E.none}
        stale = batch([b"zombie"], pid=pid, epoch=old_epoch, seq=0, transactional=True)
        assert (await api.produce("t", stale, transactional_id="tx")).error_code == E.invalid_producer_epoch
        stranger = batch([b"?"], pid=pid + 100, epoch=0, seq=0, transactional=True)
        assert (await api.produce("t", stranger, transactional_id="tx")).error_code == E.invalid_producer_id_mapping
        assert api.log_end("t") == 0

    run(tmp_path, scenario)


def test_produce_v12_adds_the_partition_to_the_transaction_implicitly(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        pid, epoch = await api.producer("tx")
        data = batch([b"a"], pid=pid, epoch=epoch, seq=0, transactional=True)
        # v11 (transaction version 1): verification refuses it; v11 clients take TRANSACTION_ABORTABLE
        # (Kafka's AddPartitionsToTxnManager), older ones INVALID_TXN_STATE
        assert (await api.produce("t", data, transactional_id="tx", version=11)).error_code == E.transaction_abortable
        refused = await api.produce("t", data, transactional_id="tx", version=10)
        assert (refused.error_code, refused.error_message) == (E.invalid_txn_state,
                                                               "Partition was not added to the transaction")
        # v12 (KIP-890 part 2): the broker adds the partition, then appends
        p = await api.produce("t", data, transactional_id="tx", version=12)
        assert (p.error_code, p.base_offset) == (E.none, 0)
        assert ("t", 0) in api.broker.txn.describe("tx").partitions
        assert api.partition("t").last_stable_offset() == 0  # its transaction is open

    run(tmp_path, scenario)


# ---------------------------------------------------------------------- divergences from Kafka
# Found by these tests (Kafka's answers; fixed in the partition's producer state and in Produce).


def test_a_plain_batch_from_a_producer_with_an_open_transaction_is_invalid_txn_state(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        pid, epoch = await api.begin("tx", [("t", 0)])
        txn = batch([b"a"], pid=pid, epoch=epoch, seq=0, transactional=True)
        assert (await api.produce("t", txn, transactional_id="tx")).error_code == E.none
        plain = await api.produce("t", batch([b"b"], pid=pid, epoch=epoch, seq=1), transactional_id="tx")
        assert plain.error_code == E.invalid_txn_state
        assert api.log_end("t") == 1

    run(tmp_path, scenario)


def test_transactional_records_without_a_transactional_id_are_refused(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        pid, epoch = await api.begin("tx", [("t", 0)])
        txn = batch([b"a"], pid=pid, epoch=epoch, seq=0, transactional=True)
        p = await api.produce("t", txn, transactional_id=None)
        assert p.error_code == E.transactional_id_authorization_failed
        assert api.log_end("t") == 0

    run(tmp_path, scenario)


def test_a_partition_named_twice_counts_once_with_its_last_records(tmp_path):
    # Kafka reads the request's partitions into a map: the last entry counts, answered once
    async def scenario(api):
        import datetime

        from .harness import request_module

        await api.create_topic("t")
        m = request_module(0, 9)
        resp = await api.call(0, 9, m.ProduceRequest(
            transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
            topic_data=(m.TopicProduceData(name="t", partition_data=(
                m.PartitionProduceData(index=0, records=batch([b"first"])),
                m.PartitionProduceData(index=0, records=batch([b"last"])))),)))
        assert [(p.index, p.error_code) for p in resp.responses[0].partition_responses] == [(0, E.none)]
        assert [r.value for r in records_of((await api.fetch("t")).records)] == [b"last"]

    run(tmp_path, scenario)


def test_a_batch_whose_base_offset_is_not_zero_is_invalid_record(tmp_path):
    # Kafka 4.4's answer: INVALID_RECORD with the partition's log start offset, nothing stored
    async def scenario(api):
        await api.create_topic("t")
        b = bytearray(batch([b"a"]))
        b[0:8] = (5).to_bytes(8, "big")  # not covered by the CRC
        p = await api.produce("t", bytes(b))
        assert (p.error_code, p.log_start_offset, p.record_errors) == (E.invalid_record, 0, ())
        assert api.log_end("t") == 0

    run(tmp_path, scenario)
