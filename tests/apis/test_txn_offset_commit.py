"""TxnOffsetCommit (key 28) against an in-process broker: offsets committed inside a transaction
(AddOffsetsToTxn first) stay pending — UNSTABLE_OFFSET_COMMIT for a require_stable OffsetFetch —
until the COMMIT marker reaches ``__consumer_offsets``, and vanish on ABORT; the checks that
refuse a commit outside such a transaction or from a fenced producer. From v5 (transaction
version 2) no AddOffsetsToTxn comes first: the group's offsets partition joins the transaction
with the commit (Kafka's ADD_PARTITION verification for TxnOffsetCommit v5+; the Java client 4.x
sends it so)."""

from __future__ import annotations

import pytest

from oncelog.protocol import records as rb

from .harness import E, records_of, run, wait_until

GROUP = "g"
IN0, IN1 = ("in", 0), ("in", 1)


async def _stable_offsets(api, partitions):
    """OffsetFetch(require_stable) once no partition answers UNSTABLE_OFFSET_COMMIT."""
    async def fetched():
        top, parts = await api.offset_fetch(GROUP, partitions)
        assert top == E.none
        return parts if all(code != E.unstable_offset_commit for code, _, _ in parts.values()) else None

    return await wait_until(fetched, "the transactional offsets to settle")


async def _commit_offsets_in_txn(api, pid, epoch, offsets, *, commit, metadata=""):
    assert await api.add_offsets("tx", pid, epoch, GROUP) == E.none
    codes = await api.txn_offset_commit("tx", pid, epoch, GROUP, offsets, metadata=metadata)
    assert codes == {tp: E.none for tp in offsets}
    assert (await api.end_txn("tx", pid, epoch, commit=commit)).error_code == E.none


def test_offsets_are_unstable_until_the_commit_marker_then_committed(tmp_path):
    async def scenario(api):
        await api.create_topic("in", partitions=2)
        pid, epoch = await api.producer("tx")
        assert await api.add_offsets("tx", pid, epoch, GROUP) == E.none
        codes = await api.txn_offset_commit("tx", pid, epoch, GROUP, {IN0: 42, IN1: 7}, metadata="m")
        assert codes == {IN0: E.none, IN1: E.none}

        # pending: require_stable is told so per partition; a plain fetch sees no offset
        top, parts = await api.offset_fetch(GROUP, [IN0, IN1])
        assert top == E.none
        assert parts == {IN0: (E.unstable_offset_commit, -1, ""), IN1: (E.unstable_offset_commit, -1, "")}
        top, parts = await api.offset_fetch(GROUP, [IN0, IN1], require_stable=False)
        assert parts == {IN0: (E.none, -1, ""), IN1: (E.none, -1, "")}

        assert (await api.end_txn("tx", pid, epoch, commit=True)).error_code == E.none
        assert await _stable_offsets(api, [IN0, IN1]) == {IN0: (E.none, 42, "m"), IN1: (E.none, 7, "m")}
        # the offsets went to the group's __consumer_offsets partition, followed by the COMMIT marker
        offsets_partition = api.broker.offsets_topic.partition_for(GROUP)
        internal = api.partition("__consumer_offsets", offsets_partition).log
        data = internal.read(0, 1 << 20, internal.high_watermark)
        tail = records_of(data)[-1]
        assert (tail.control, tail.producer_id) == (rb.CONTROL_COMMIT, pid)

    run(tmp_path, scenario)


def test_after_an_abort_the_previously_committed_offset_stays(tmp_path):
    async def scenario(api):
        await api.create_topic("in")
        pid, epoch = await api.producer("tx")
        await _commit_offsets_in_txn(api, pid, epoch, {IN0: 5}, commit=True)
        assert await _stable_offsets(api, [IN0]) == {IN0: (E.none, 5, "")}
        await _commit_offsets_in_txn(api, pid, epoch, {IN0: 9}, commit=False)
        assert await _stable_offsets(api, [IN0]) == {IN0: (E.none, 5, "")}
        assert not api.broker.groups.has_pending_txn_offset(GROUP, *IN0)

    run(tmp_path, scenario)


def test_offsets_of_a_transaction_aborted_by_a_new_instance_vanish(tmp_path):
    async def scenario(api):
        await api.create_topic("in")
        pid, epoch = await api.producer("tx")
        assert await api.add_offsets("tx", pid, epoch, GROUP) == E.none
        assert await api.txn_offset_commit("tx", pid, epoch, GROUP, {IN0: 3}) == {IN0: E.none}
        await api.producer("tx")  # fences and aborts the open transaction
        assert await _stable_offsets(api, [IN0]) == {IN0: (E.none, -1, "")}

    run(tmp_path, scenario)


def test_txn_offset_commit_without_add_offsets_to_txn_is_invalid_txn_state(tmp_path):
    async def scenario(api):
        await api.create_topic("in")
        await api.create_topic("out")
        pid, epoch = await api.producer("tx")
        # no transaction open at all
        assert await api.txn_offset_commit("tx", pid, epoch, GROUP, {IN0: 1}) == {IN0: E.invalid_txn_state}
        # a transaction open on a data partition only: the group's offsets partition is not in it
        await api.add_partitions("tx", pid, epoch, [("out", 0)])
        assert await api.txn_offset_commit("tx", pid, epoch, GROUP, {IN0: 1}) == {IN0: E.invalid_txn_state}
        # AddOffsetsToTxn for another group does not cover this one (unless both hash to the
        # same offsets partition)
        other = next(g for g in (f"other-{i}" for i in range(100))
                     if api.broker.offsets_topic.partition_for(g) != api.broker.offsets_topic.partition_for(GROUP))
        assert await api.add_offsets("tx", pid, epoch, other) == E.none
        assert await api.txn_offset_commit("tx", pid, epoch, GROUP, {IN0: 1}) == {IN0: E.invalid_txn_state}
        # nothing was staged: a stable fetch is not kept waiting, and finds no offset
        top, parts = await api.offset_fetch(GROUP, [IN0])
        assert (top, parts) == (E.none, {IN0: (E.none, -1, "")})

    run(tmp_path, scenario)


@pytest.mark.parametrize("version, code", [
    # Kafka 4.x: INVALID_PRODUCER_EPOCH at every version (AddPartitionsToTxnManager's translation)
    (0, E.invalid_producer_epoch), (1, E.invalid_producer_epoch), (2, E.invalid_producer_epoch),
    (3, E.invalid_producer_epoch),
])
def test_txn_offset_commit_of_a_stale_epoch_is_fenced_with_the_code_of_its_version(tmp_path, version, code):
    async def scenario(api):
        await api.create_topic("in")
        pid, old_epoch = await api.producer("tx")
        _, epoch = await api.producer("tx")
        assert await api.add_offsets("tx", pid, epoch, GROUP) == E.none
        codes = await api.txn_offset_commit("tx", pid, old_epoch, GROUP, {IN0: 1}, version=version)
        assert codes == {IN0: code}
        assert not api.broker.groups.has_pending_txn_offset(GROUP, *IN0)

    run(tmp_path, scenario)


def test_txn_offset_commit_of_an_unknown_producer_or_partition(tmp_path):
    async def scenario(api):
        await api.create_topic("in")
        pid, epoch = await api.producer("tx")
        assert await api.add_offsets("tx", pid, epoch, GROUP) == E.none
        assert await api.txn_offset_commit("tx", pid + 1, epoch, GROUP, {IN0: 1}) == {
            IN0: E.invalid_producer_id_mapping}
        assert await api.txn_offset_commit("nobody", pid, epoch, GROUP, {IN0: 1}) == {
            IN0: E.invalid_producer_id_mapping}
        codes = await api.txn_offset_commit("tx", pid, epoch, GROUP, {IN0: 4, ("in", 9): 4, ("gone", 0): 4})
        assert codes == {IN0: E.none, ("in", 9): E.unknown_topic_or_partition,
                         ("gone", 0): E.unknown_topic_or_partition}
        assert (await api.end_txn("tx", pid, epoch, commit=True)).error_code == E.none
        assert await _stable_offsets(api, [IN0]) == {IN0: (E.none, 4, "")}

    run(tmp_path, scenario)


# Kafka 4.4 answers the first commit so (v4: its GENERIC_ERROR_SUPPORTED verification).
@pytest.mark.parametrize("version, code", [(3, E.invalid_txn_state), (4, E.transaction_abortable), (5, E.none)])
def test_txn_offset_commit_without_add_offsets_to_txn_joins_the_transaction_from_v5(tmp_path, version, code):
    async def scenario(api):
        await api.create_topic("in")
        pid, epoch = await api.producer("tx")
        # no transaction open, no AddOffsetsToTxn: v5 starts one holding the group's offsets partition
        assert await api.txn_offset_commit("tx", pid, epoch, GROUP, {IN0: 11}, version=version) == {IN0: code}
        if code != E.none:
            assert not api.broker.groups.has_pending_txn_offset(GROUP, *IN0)
            return
        top, parts = await api.offset_fetch(GROUP, [IN0])
        assert parts == {IN0: (E.unstable_offset_commit, -1, "")}
        end = await api.end_txn("tx", pid, epoch, commit=True, version=5)
        assert end.error_code == E.none and end.producer_epoch == epoch + 1  # TV2: EndTxn bumps the epoch
        assert await _stable_offsets(api, [IN0]) == {IN0: (E.none, 11, "")}
        internal = api.partition("__consumer_offsets", api.broker.offsets_topic.partition_for(GROUP)).log
        tail = records_of(internal.read(0, 1 << 20, internal.high_watermark))[-1]
        assert (tail.control, tail.producer_id) == (rb.CONTROL_COMMIT, pid)
        # the next transaction, at the bumped epoch, joins again; its abort drops the offset
        epoch += 1
        assert await api.txn_offset_commit("tx", pid, epoch, GROUP, {IN0: 12}, version=5) == {IN0: E.none}
        assert (await api.end_txn("tx", pid, epoch, commit=False, version=5)).error_code == E.none
        assert await _stable_offsets(api, [IN0]) == {IN0: (E.none, 11, "")}

    run(tmp_path, scenario)


def test_txn_offset_commit_v5_of_a_stale_epoch_is_fenced_and_adds_nothing(tmp_path):
    async def scenario(api):
        await api.create_topic("in")
        pid, old_epoch = await api.producer("tx")
        _, epoch = await api.producer("tx")
        assert await api.txn_offset_commit("tx", pid, old_epoch, GROUP, {IN0: 1}, version=5) == {
            IN0: E.invalid_producer_epoch}
        assert not api.broker.groups.has_pending_txn_offset(GROUP, *IN0)
        # the current epoch is unharmed: no transaction was started for the stale one
        assert await api.txn_offset_commit("tx", pid, epoch, GROUP, {IN0: 2}, version=5) == {IN0: E.none}
        assert (await api.end_txn("tx", pid, epoch, commit=True, version=5)).error_code == E.none
        assert await _stable_offsets(api, [IN0]) == {IN0: (E.none, 2, "")}

    run(tmp_path, scenario)
