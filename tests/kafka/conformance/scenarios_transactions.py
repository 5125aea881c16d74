"""Transactions: every transaction API in the states of the coordinator's table, fencing and
expiry, KIP-447 (TxnOffsetCommit with the group's generation), KIP-890 (transaction version 2:
EndTxn v5's bumped epoch, Produce v12's implicit add, AddPartitionsToTxn v4 verify-only) and
KIP-360 (InitProducerId bumping a known producer's epoch). DescribeTransactions,
ListTransactions and DescribeProducers are :mod:`.scenarios_transactions_describe`', on the helpers
here.

The coordinator's Prepare* states last while markers are written, after EndTxn is answered;
what a request meets then depends on timing, so scenarios wait for a Complete* state
(:meth:`Conversation.wait_txn_complete`) before the next request, except where the answer does
not depend on it (InitProducerId during an Ongoing transaction starts its abort and answers
CONCURRENT_TRANSACTIONS at once).
"""

from __future__ import annotations

import dataclasses
import datetime


from .framework import (ADD_PARTITIONS_TO_TXN, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, INIT_PRODUCER_ID, JOIN_GROUP,
                        LIST_TRANSACTIONS, OFFSET_FETCH, SYNC_GROUP, TXN_OFFSET_COMMIT, batch, mod,
                        scenario)


def _make(cls, **kw):
    """``cls`` from a superset of its fields (each version's class keeps those it has)."""
    fields = cls.__dataclass_fields__
    return cls(**{k_: v for k_, v in kw.items() if k_ in fields})


def txn_batch(values, pid, epoch, seq):
    return batch(list(values), pid=pid, epoch=epoch, seq=seq, transactional=True)


def begin(k, base, partitions=None, *, timeout_ms=60000):
    """InitProducerId for ``k.name(base)`` and, if ``partitions`` ({topic: [p]}), AddPartitionsToTxn:
    (transactional id, producer id, epoch)."""
    tid = k.name(base)
    init = k.init_producer_id(tid, timeout_ms=timeout_ms)
    if int(init.error_code) != 0:
        raise AssertionError(f"InitProducerId {base}: {init.error_code!r}")
    if partitions:
        k.add_partitions_to_txn(tid, init.producer_id, init.producer_epoch, partitions)
    return tid, init.producer_id, init.producer_epoch


def end(k, tid, pid, epoch, commit, *, version=3):
    """EndTxn, then wait until its markers are written; returns the EndTxn answer."""
    resp = k.end_txn(tid, pid, epoch, commit, version=version)
    if int(resp.error_code) == 0:
        k.wait_txn_complete(tid)
    return resp


def describe(k, tid):
    """DescribeTransactions v0 of one id, topics and partitions sorted (Kafka's order is a set's);
    the start time is a clock reading, compared only as set or not (-1: the client decodes it as
    None, see oncelog.protocol.timestamps)."""
    m = mod(DESCRIBE_TRANSACTIONS, 0)
    resp = k.send(m.DescribeTransactionsRequest(transactional_ids=(tid,)))
    return {"transaction_states": [
        {"error_code": s.error_code.name, "transactional_id": s.transactional_id,
         "transaction_state": s.transaction_state,
         "transaction_timeout_ms": int(s.transaction_timeout.total_seconds() * 1000),
         "transaction_start": -1 if s.transaction_start_time is None else "set",
         "producer_id": int(s.producer_id), "producer_epoch": int(s.producer_epoch),
         "topics": sorted(({"topic": t.topic, "partitions": sorted(int(p) for p in t.partitions)} for t in s.topics),
                          key=lambda t: t["topic"])}
        for s in resp.transaction_states]}


def state(k, tid):
    return describe(k, tid)["transaction_states"][0]["transaction_state"]


def list_txns(k, states=(), pids=(), *, version=1):
    m = mod(LIST_TRANSACTIONS, version)
    kw = dict(state_filters=tuple(states), producer_id_filters=tuple(pids), duration_filter=-1)
    fields = m.ListTransactionsRequest.__dataclass_fields__
    return k.send(m.ListTransactionsRequest(**{k_: v for k_, v in kw.items() if k_ in fields}))


def describe_producers(k, topic, partitions=(0,)):
    m = mod(DESCRIBE_PRODUCERS, 0)
    return k.send(m.DescribeProducersRequest(topics=(m.TopicRequest(name=topic, partition_indexes=tuple(partitions)),)))


def add_partitions_v4(k, txns, *, version=4):
    """AddPartitionsToTxn v4+: ``txns`` = [(tid, pid, epoch, verify_only, {topic: [p]}), ...]; the
    results sorted by transactional id."""
    m = mod(ADD_PARTITIONS_TO_TXN, version)
    resp = k.send(m.AddPartitionsToTxnRequest(transactions=tuple(
        m.AddPartitionsToTxnTransaction(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                        verify_only=verify, topics=tuple(
                                            m.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps))
                                            for t, ps in parts.items()))
        for tid, pid, epoch, verify, parts in txns)))
    return dataclasses.replace(resp, results_by_transaction=tuple(
        sorted(resp.results_by_transaction, key=lambda r: r.transactional_id)))


def txn_offset_commit(k, tid, group, pid, epoch, topic, offset, *, generation_id=-1, member_id="", version=3):
    m = mod(TXN_OFFSET_COMMIT, version)
    kw = dict(transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
              generation_id=generation_id, member_id=member_id, group_instance_id=None,
              topics=(m.TxnOffsetCommitRequestTopic(name=topic, partitions=(_make(
                  m.TxnOffsetCommitRequestPartition, partition_index=0, committed_offset=offset,
                  committed_leader_epoch=-1, committed_metadata=""),)),))
    fields = m.TxnOffsetCommitRequest.__dataclass_fields__
    return k.send(m.TxnOffsetCommitRequest(**{k_: v for k_, v in kw.items() if k_ in fields}))


def offset_fetch(k, group, topic, *, require_stable=True, version=8):
    m = mod(OFFSET_FETCH, version)
    return k.send(m.OffsetFetchRequest(groups=(m.OffsetFetchRequestGroup(group_id=group, topics=(
        m.OffsetFetchRequestTopics(name=topic, partition_indexes=(0,)),)),), require_stable=require_stable))


def join_and_sync(k, group):
    """A one-member classic group formed with JoinGroup v9 (twice: MEMBER_ID_REQUIRED first) and
    SyncGroup v5: (member id, generation id)."""
    jm = mod(JOIN_GROUP, 9)

    def join(member_id):
        return k.send(jm.JoinGroupRequest(
            group_id=group, session_timeout=datetime.timedelta(seconds=30),
            rebalance_timeout=datetime.timedelta(seconds=30), member_id=member_id, group_instance_id=None,
            protocol_type="consumer", protocols=(jm.JoinGroupRequestProtocol(name="range", metadata=b""),),
            reason=None))

    first = join("")
    joined = join(first.member_id)
    sm = mod(SYNC_GROUP, 5)
    synced = k.send(sm.SyncGroupRequest(
        group_id=group, generation_id=joined.generation_id, member_id=joined.member_id, group_instance_id=None,
        protocol_type="consumer", protocol_name="range",
        assignments=(sm.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b""),)))
    if int(synced.error_code) != 0:
        raise AssertionError(f"SyncGroup: {synced.error_code!r}")
    return joined.member_id, joined.generation_id


def end_v5(k, tid, pid, epoch, commit):
    return k.end_txn(tid, pid, epoch, commit, version=5)


# ---------------------------------------------------------------------- InitProducerId


@scenario("transactions")
def init_new(k):
    """InitProducerId for a new transactional id: a producer id, epoch 0; DescribeTransactions: Empty."""
    tid = k.name("tx")
    return [k.init_producer_id(tid), describe(k, tid)]


@scenario("transactions")
def init_again_bumps_epoch(k):
    """A second InitProducerId for the same id in Empty: the same producer id, epoch 1."""
    tid = k.name("tx")
    return [k.init_producer_id(tid), k.init_producer_id(tid), describe(k, tid)]


@scenario("transactions")
def init_timeout_zero(k):
    """transaction_timeout_ms 0: INVALID_TRANSACTION_TIMEOUT."""
    return k.init_producer_id(k.name("tx"), timeout_ms=0)


@scenario("transactions")
def init_timeout_above_max(k):
    """transaction_timeout_ms above transaction.max.timeout.ms (15 min): INVALID_TRANSACTION_TIMEOUT."""
    return k.init_producer_id(k.name("tx"), timeout_ms=900_001)


@scenario("transactions")
def init_empty_transactional_id(k):
    """InitProducerId with an empty transactional id."""
    return k.init_producer_id("")


@scenario("transactions")
def init_kip360_bump(k):
    """KIP-360: InitProducerId naming the current producer id and epoch bumps the epoch."""
    tid = k.name("tx")
    first = k.init_producer_id(tid)
    return [first, k.init_producer_id(tid, producer_id=first.producer_id, producer_epoch=first.producer_epoch)]


@scenario("transactions")
def init_kip360_stale_epoch(k):
    """KIP-360 with an epoch older than the current one: refused (fenced)."""
    tid = k.name("tx")
    first = k.init_producer_id(tid)
    k.init_producer_id(tid)
    return k.init_producer_id(tid, producer_id=first.producer_id, producer_epoch=first.producer_epoch)


@scenario("transactions")
def init_kip360_wrong_producer_id(k):
    """KIP-360 naming another producer id: INVALID_PRODUCER_ID_MAPPING."""
    tid = k.name("tx")
    first = k.init_producer_id(tid)
    return k.init_producer_id(tid, producer_id=first.producer_id + 1000, producer_epoch=0)


@scenario("transactions")
def init_kip360_idempotent(k):
    """KIP-360 for an idempotent producer (no transactional id) naming its id and epoch."""
    first = k.init_producer_id()
    return [first, k.init_producer_id(producer_id=first.producer_id, producer_epoch=first.producer_epoch)]


@scenario("transactions")
def init_during_ongoing(k):
    """InitProducerId while a transaction is Ongoing: CONCURRENT_TRANSACTIONS (abort begun); once
    aborted, a retry gets a newer epoch, and the data is aborted."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    k.produce(t, txn_batch([b"x"], pid, epoch, 0), transactional_id=tid)
    busy = k.init_producer_id(tid)
    k.wait_txn_complete(tid)
    return [busy, k.init_producer_id(tid), describe(k, tid)]


# ---------------------------------------------------------------------- AddPartitionsToTxn


@scenario("transactions")
def add_partitions_starts_txn(k):
    """AddPartitionsToTxn in Empty: NONE, the state becomes Ongoing with the partitions."""
    t = k.create_topic("t", partitions=2)
    tid, pid, epoch = begin(k, "tx")
    resp = k.add_partitions_to_txn(tid, pid, epoch, {t: [1, 0]})
    return [sorted((p.partition_index, p.partition_error_code.name) for r in resp.results_by_topic_v3_and_below
                   for p in r.results_by_partition), describe(k, tid)]


@scenario("transactions")
def add_partitions_twice(k):
    """The same partition added twice: NONE both times."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx")
    return [k.add_partitions_to_txn(tid, pid, epoch, {t: [0]}), k.add_partitions_to_txn(tid, pid, epoch, {t: [0]}),
            describe(k, tid)]


@scenario("transactions")
def add_partitions_old_epoch(k):
    """AddPartitionsToTxn with the epoch before a re-init: fenced."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx")
    k.init_producer_id(tid)
    return k.add_partitions_to_txn(tid, pid, epoch, {t: [0]})


@scenario("transactions")
def add_partitions_future_epoch(k):
    """AddPartitionsToTxn with an epoch above the current one."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx")
    return k.add_partitions_to_txn(tid, pid, epoch + 3, {t: [0]})


@scenario("transactions")
def add_partitions_wrong_producer_id(k):
    """AddPartitionsToTxn naming another producer id: INVALID_PRODUCER_ID_MAPPING."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx")
    return k.add_partitions_to_txn(tid, pid + 1000, epoch, {t: [0]})


@scenario("transactions")
def add_partitions_unknown_transactional_id(k):
    """AddPartitionsToTxn for a transactional id never initialised."""
    t = k.create_topic("t")
    return k.add_partitions_to_txn(k.name("never"), 5, 0, {t: [0]})


@scenario("transactions")
def add_partitions_unknown_topic(k):
    """One unknown topic among known partitions: it is UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx")
    resp = k.add_partitions_to_txn(tid, pid, epoch, {t: [0], k.name("missing"): [0]})
    return [sorted(((r.name, p.partition_index, p.partition_error_code.name) for r in resp.results_by_topic_v3_and_below
                    for p in r.results_by_partition)), describe(k, tid)]


@scenario("transactions")
def add_partitions_after_commit(k):
    """After a commit completes, AddPartitionsToTxn starts the next transaction (Ongoing again)."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    end(k, tid, pid, epoch, True)
    return [k.add_partitions_to_txn(tid, pid, epoch, {t: [0]}), describe(k, tid)]


@scenario("transactions")
def add_partitions_v4_verify_only_not_added(k):
    """AddPartitionsToTxn v4 verify_only for a partition not in the Ongoing transaction."""
    t = k.create_topic("t", partitions=2)
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    return [add_partitions_v4(k, [(tid, pid, epoch, True, {t: [1]})]), describe(k, tid)]


@scenario("transactions")
def add_partitions_v4_verify_only_added(k):
    """AddPartitionsToTxn v4 verify_only for a partition in the transaction: NONE, nothing changes."""
    t = k.create_topic("t", partitions=2)
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    return [add_partitions_v4(k, [(tid, pid, epoch, True, {t: [0]})]), describe(k, tid)]


@scenario("transactions")
def add_partitions_v4_verify_only_empty(k):
    """AddPartitionsToTxn v4 verify_only in Empty (no transaction yet)."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx")
    return [add_partitions_v4(k, [(tid, pid, epoch, True, {t: [0]})]), describe(k, tid)]


@scenario("transactions")
def add_partitions_v4_two_transactions(k):
    """AddPartitionsToTxn v4 for two transactions at once, one with a wrong epoch."""
    t = k.create_topic("t", partitions=2)
    tid1, pid1, e1 = begin(k, "tx1")
    tid2, pid2, e2 = begin(k, "tx2")
    return [add_partitions_v4(k, [(tid1, pid1, e1, False, {t: [0]}), (tid2, pid2, e2 + 5, False, {t: [1]})]),
            describe(k, tid1), describe(k, tid2)]


# ---------------------------------------------------------------------- AddOffsetsToTxn / TxnOffsetCommit


@scenario("transactions")
def add_offsets_starts_txn(k):
    """AddOffsetsToTxn in Empty: NONE, the group's __consumer_offsets partition joins an Ongoing transaction."""
    tid, pid, epoch = begin(k, "tx")
    return [k.add_offsets_to_txn(tid, pid, epoch, k.name("g")), state(k, tid)]


@scenario("transactions")
def add_offsets_old_epoch(k):
    """AddOffsetsToTxn with the epoch before a re-init: fenced."""
    tid, pid, epoch = begin(k, "tx")
    k.init_producer_id(tid)
    return k.add_offsets_to_txn(tid, pid, epoch, k.name("g"))


@scenario("transactions")
def txn_offset_commit_without_add_offsets(k):
    """TxnOffsetCommit in an Ongoing transaction that did not add the group's offsets."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    return txn_offset_commit(k, tid, k.name("g"), pid, epoch, t, 5)


@scenario("transactions")
def txn_offset_commit_pending_then_committed(k):
    """TxnOffsetCommit: require_stable OffsetFetch is UNSTABLE_OFFSET_COMMIT until the commit, then 5."""
    t = k.create_topic("t")
    g = k.name("g")
    tid, pid, epoch = begin(k, "tx")
    added = k.add_offsets_to_txn(tid, pid, epoch, g)
    commit = txn_offset_commit(k, tid, g, pid, epoch, t, 5)
    pending = offset_fetch(k, g, t)
    end(k, tid, pid, epoch, True)
    return [added, commit, pending, offset_fetch(k, g, t)]


@scenario("transactions")
def txn_offset_commit_aborted(k):
    """A transactional offset commit that is aborted: the group's offset stays unset (-1)."""
    t = k.create_topic("t")
    g = k.name("g")
    tid, pid, epoch = begin(k, "tx")
    k.add_offsets_to_txn(tid, pid, epoch, g)
    txn_offset_commit(k, tid, g, pid, epoch, t, 5)
    end(k, tid, pid, epoch, False)
    return offset_fetch(k, g, t)


@scenario("transactions")
def txn_offset_commit_old_epoch(k):
    """TxnOffsetCommit with the epoch before a re-init, and with one above the current: fenced."""
    t = k.create_topic("t")
    g = k.name("g")
    tid, pid, _ = begin(k, "tx")
    epoch = k.init_producer_id(tid).producer_epoch
    k.add_offsets_to_txn(tid, pid, epoch, g)
    return [txn_offset_commit(k, tid, g, pid, epoch - 1, t, 5), txn_offset_commit(k, tid, g, pid, epoch + 1, t, 5)]


@scenario("transactions")
def kip447_member_and_generation(k):
    """KIP-447: TxnOffsetCommit with the group member's id and generation: NONE."""
    t = k.create_topic("t")
    g = k.name("g")
    member, generation = join_and_sync(k, g)
    tid, pid, epoch = begin(k, "tx")
    k.add_offsets_to_txn(tid, pid, epoch, g)
    return txn_offset_commit(k, tid, g, pid, epoch, t, 5, generation_id=generation, member_id=member)


@scenario("transactions")
def kip447_illegal_generation(k):
    """KIP-447: a stale generation id: ILLEGAL_GENERATION."""
    t = k.create_topic("t")
    g = k.name("g")
    member, generation = join_and_sync(k, g)
    tid, pid, epoch = begin(k, "tx")
    k.add_offsets_to_txn(tid, pid, epoch, g)
    return txn_offset_commit(k, tid, g, pid, epoch, t, 5, generation_id=generation + 1, member_id=member)


@scenario("transactions")
def kip447_unknown_member(k):
    """KIP-447: a member id the group does not know: UNKNOWN_MEMBER_ID."""
    t = k.create_topic("t")
    g = k.name("g")
    member, generation = join_and_sync(k, g)
    tid, pid, epoch = begin(k, "tx")
    k.add_offsets_to_txn(tid, pid, epoch, g)
    return txn_offset_commit(k, tid, g, pid, epoch, t, 5, generation_id=generation, member_id="someone-else")


@scenario("transactions")
def kip447_generation_below_v3(k):
    """TxnOffsetCommit v2 (no member fields) to a group with members: accepted without the check."""
    t = k.create_topic("t")
    g = k.name("g")
    join_and_sync(k, g)
    tid, pid, epoch = begin(k, "tx")
    k.add_offsets_to_txn(tid, pid, epoch, g)
    return txn_offset_commit(k, tid, g, pid, epoch, t, 5, version=2)


# ---------------------------------------------------------------------- EndTxn


@scenario("transactions")
def commit_with_nothing_added(k):
    """EndTxn commit (v3) in Empty: INVALID_TXN_STATE."""
    tid, pid, epoch = begin(k, "tx")
    return [k.end_txn(tid, pid, epoch, True), describe(k, tid)]


@scenario("transactions")
def abort_with_nothing_added(k):
    """EndTxn abort (v3) in Empty: INVALID_TXN_STATE."""
    tid, pid, epoch = begin(k, "tx")
    return [k.end_txn(tid, pid, epoch, False), describe(k, tid)]


@scenario("transactions")
def commit_then_complete(k):
    """EndTxn commit: NONE; once markers are written the state is CompleteCommit, no partitions."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    k.produce(t, txn_batch([b"x"], pid, epoch, 0), transactional_id=tid)
    return [end(k, tid, pid, epoch, True), describe(k, tid)]


@scenario("transactions")
def abort_then_complete(k):
    """EndTxn abort: NONE; then CompleteAbort."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    k.produce(t, txn_batch([b"x"], pid, epoch, 0), transactional_id=tid)
    return [end(k, tid, pid, epoch, False), describe(k, tid)]


@scenario("transactions")
def commit_twice(k):
    """A commit retried after CompleteCommit: NONE (the retry is recognised)."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    end(k, tid, pid, epoch, True)
    return [k.end_txn(tid, pid, epoch, True), describe(k, tid)]


@scenario("transactions")
def abort_twice(k):
    """An abort retried after CompleteAbort: NONE."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    end(k, tid, pid, epoch, False)
    return [k.end_txn(tid, pid, epoch, False), describe(k, tid)]


@scenario("transactions")
def abort_after_commit(k):
    """An abort after CompleteCommit: INVALID_TXN_STATE."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    end(k, tid, pid, epoch, True)
    return [k.end_txn(tid, pid, epoch, False), describe(k, tid)]


@scenario("transactions")
def commit_after_abort(k):
    """A commit after CompleteAbort: INVALID_TXN_STATE."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    end(k, tid, pid, epoch, False)
    return [k.end_txn(tid, pid, epoch, True), describe(k, tid)]


@scenario("transactions")
def end_txn_old_epoch(k):
    """EndTxn with the epoch before a re-init (Empty, re-initialised): fenced."""
    tid, pid, epoch = begin(k, "tx")
    k.init_producer_id(tid)
    return k.end_txn(tid, pid, epoch, True)


@scenario("transactions")
def end_txn_wrong_producer_id(k):
    """EndTxn naming another producer id: INVALID_PRODUCER_ID_MAPPING."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    return [k.end_txn(tid, pid + 1000, epoch, True), describe(k, tid)]


@scenario("transactions")
def end_txn_unknown_transactional_id(k):
    """EndTxn for a transactional id never initialised."""
    return k.end_txn(k.name("never"), 5, 0, True)


@scenario("transactions")
def fenced_by_new_producer(k):
    """A second producer's InitProducerId aborts the first one's Ongoing transaction; the first's
    EndTxn is then fenced."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    k.produce(t, txn_batch([b"x"], pid, epoch, 0), transactional_id=tid)
    other = k.connect()
    k.init_producer_id(tid, via=other)  # CONCURRENT_TRANSACTIONS: the abort has begun
    k.wait_txn_complete(tid)
    second = k.init_producer_id(tid, via=other)
    return [second, k.end_txn(tid, pid, epoch, True), describe(k, tid), k.fetch(t)]


@scenario("transactions")
def expired_by_timeout(k):
    """A transaction past its transaction.timeout.ms (1 s) is aborted by the coordinator; the
    producer's EndTxn with its epoch is then fenced."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]}, timeout_ms=1000)
    k.produce(t, txn_batch([b"x"], pid, epoch, 0), transactional_id=tid)
    k.wait_until(lambda: state(k, tid) == "CompleteAbort", "expiry abort", timeout=60)
    return [describe(k, tid), k.end_txn(tid, pid, epoch, True), k.wait_stable(t)]


# ---------------------------------------------------------------------- transaction version 2 (KIP-890)


def _tv2_produce(k, t, tid, pid, epoch, seq, value=b"x", partition=0):
    return k.produce(t, [(partition, txn_batch([value], pid, epoch, seq))], transactional_id=tid, version=12)


@scenario("transactions")
def tv2_end_txn_v5_bumps_epoch(k):
    """TV2: Produce v12 adds the partition implicitly; EndTxn v5 commit answers the bumped epoch."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx")
    produced = _tv2_produce(k, t, tid, pid, epoch, 0)
    ongoing = describe(k, tid)
    ended = end_v5(k, tid, pid, epoch, True)
    k.wait_txn_complete(tid)
    return [produced, ongoing, ended, describe(k, tid), k.wait_stable(t)]


@scenario("transactions")
def tv2_abort_v5_bumps_epoch(k):
    """TV2: EndTxn v5 abort answers the bumped epoch too; the marker carries it."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx")
    _tv2_produce(k, t, tid, pid, epoch, 0)
    ended = end_v5(k, tid, pid, epoch, False)
    k.wait_txn_complete(tid)
    return [ended, describe(k, tid), k.wait_stable(t)]


@scenario("transactions")
def tv2_old_epoch_after_bump(k):
    """TV2: after EndTxn v5's bump, a Produce v12 with the old epoch is refused."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx")
    _tv2_produce(k, t, tid, pid, epoch, 0)
    end_v5(k, tid, pid, epoch, True)
    k.wait_txn_complete(tid)
    return [_tv2_produce(k, t, tid, pid, epoch, 1), describe(k, tid)]


@scenario("transactions")
def tv2_next_transaction_new_epoch(k):
    """TV2: the next transaction with the bumped epoch starts at sequence 0 and commits."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx")
    _tv2_produce(k, t, tid, pid, epoch, 0)
    ended = end_v5(k, tid, pid, epoch, True)
    k.wait_txn_complete(tid)
    nxt = ended.producer_epoch
    second = _tv2_produce(k, t, tid, pid, nxt, 0, b"y")
    ended2 = end_v5(k, tid, pid, nxt, True)
    k.wait_txn_complete(tid)
    return [second, ended2, k.wait_stable(t)]


@scenario("transactions")
def tv2_commit_empty_v5(k):
    """EndTxn v5 commit with nothing in the transaction (Empty)."""
    tid, pid, epoch = begin(k, "tx")
    return [end_v5(k, tid, pid, epoch, True), describe(k, tid)]


@scenario("transactions")
def tv2_retry_end_txn_v5(k):
    """TV2: EndTxn v5 retried with the pre-bump epoch after it completed."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx")
    _tv2_produce(k, t, tid, pid, epoch, 0)
    end_v5(k, tid, pid, epoch, True)
    k.wait_txn_complete(tid)
    return [end_v5(k, tid, pid, epoch, True), describe(k, tid)]


@scenario("transactions")
def tv2_produce_v12_two_partitions(k):
    """TV2: one Produce v12 to two partitions not yet added: both added and written."""
    t = k.create_topic("t", partitions=2)
    tid, pid, epoch = begin(k, "tx")
    produced = k.produce(t, [(0, txn_batch([b"a"], pid, epoch, 0)), (1, txn_batch([b"b"], pid, epoch, 0))],
                         transactional_id=tid, version=12)
    produced = dataclasses.replace(produced, responses=tuple(dataclasses.replace(
        r, partition_responses=tuple(sorted(r.partition_responses, key=lambda p: p.index))) for r in produced.responses))
    return [produced, describe(k, tid)]


# ---------------------------------------------------------------------- versions


def _codes(resp):
    return [p.error_code.name for t in resp.topics for p in t.partitions]


@scenario("transactions")
def txn_offset_commit_old_epoch_by_version(k):
    """TxnOffsetCommit v0..v5 with the epoch before a re-init, after AddOffsetsToTxn: each version's code."""
    t = k.create_topic("t")
    g = k.name("g")
    tid, pid, _ = begin(k, "tx")
    epoch = k.init_producer_id(tid).producer_epoch
    k.add_offsets_to_txn(tid, pid, epoch, g)
    return [(v, _codes(txn_offset_commit(k, tid, g, pid, epoch - 1, t, 5, version=v))) for v in range(6)]


@scenario("transactions")
def txn_offset_commit_without_add_offsets_by_version(k):
    """TxnOffsetCommit v3, v4 and v5 in an Ongoing transaction that did not add the group's offsets."""
    t = k.create_topic("t")
    g = k.name("g")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    return [(v, _codes(txn_offset_commit(k, tid, g, pid, epoch, t, 5, version=v))) for v in (3, 4, 5)]


@scenario("transactions")
def txn_offset_commit_v5_implicit_add(k):
    """TV2: TxnOffsetCommit v5 without AddOffsetsToTxn, then EndTxn v5 commit: the offset is committed."""
    t = k.create_topic("t")
    g = k.name("g")
    tid, pid, epoch = begin(k, "tx")
    committed = txn_offset_commit(k, tid, g, pid, epoch, t, 5, version=5)
    ongoing = describe(k, tid)["transaction_states"][0]["transaction_state"]
    ended = end_v5(k, tid, pid, epoch, True)
    k.wait_txn_complete(tid)
    return [committed, ongoing, ended, offset_fetch(k, g, t)]


def _stale(k, t):
    """A producer re-initialised once (epoch 1) with an Ongoing transaction on ``t``: (tid, pid, epoch)."""
    tid, pid, _ = begin(k, "tx")
    epoch = k.init_producer_id(tid).producer_epoch
    k.add_partitions_to_txn(tid, pid, epoch, {t: [0]})
    return tid, pid, epoch


@scenario("transactions")
def end_txn_stale_epoch_by_version(k):
    """EndTxn v0..v5 with the epoch before a re-init: each version's code."""
    t = k.create_topic("t")
    tid, pid, epoch = _stale(k, t)
    return [(v, k.end_txn(tid, pid, epoch - 1, True, version=v)) for v in range(6)]


@scenario("transactions")
def add_partitions_stale_epoch_by_version(k):
    """AddPartitionsToTxn v0..v3 with the epoch before a re-init: each version's code."""
    t = k.create_topic("t")
    tid, pid, epoch = _stale(k, t)
    out = []
    for v in range(4):
        resp = k.add_partitions_to_txn(tid, pid, epoch - 1, {t: [0]}, version=v)
        out.append((v, [p.partition_error_code.name for r in resp.results_by_topic_v3_and_below
                        for p in r.results_by_partition]))
    return out


@scenario("transactions")
def add_offsets_stale_epoch_by_version(k):
    """AddOffsetsToTxn v0..v4 with the epoch before a re-init: each version's code."""
    t = k.create_topic("t")
    tid, pid, epoch = _stale(k, t)
    return [(v, k.add_offsets_to_txn(tid, pid, epoch - 1, k.name("g"), version=v)) for v in range(5)]


@scenario("transactions")
def init_producer_id_by_version(k):
    """InitProducerId v0..v5 for one transactional id: each answer (the epoch climbs)."""
    tid = k.name("tx")
    out = []
    for v in range(6):
        m = mod(INIT_PRODUCER_ID, v)
        out.append((v, k.send(_make(m.InitProducerIdRequest, transactional_id=tid,
                                    transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
                                    producer_epoch=-1))))
    return out


@scenario("transactions")
def end_txn_v5_after_tv1_add(k):
    """A transaction begun with AddPartitionsToTxn v3 (TV1) and ended with EndTxn v5."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    k.produce(t, txn_batch([b"x"], pid, epoch, 0), transactional_id=tid)
    ended = end_v5(k, tid, pid, epoch, True)
    if int(ended.error_code) == 0:
        k.wait_txn_complete(tid)
    return [ended, describe(k, tid), k.wait_stable(t)]


@scenario("transactions")
def end_txn_v3_after_tv2_produce(k):
    """A transaction begun by Produce v12 (TV2's implicit add) and ended with EndTxn v3."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx")
    _tv2_produce(k, t, tid, pid, epoch, 0)
    ended = k.end_txn(tid, pid, epoch, True, version=3)
    if int(ended.error_code) == 0:
        k.wait_txn_complete(tid)
    return [ended, describe(k, tid), k.wait_stable(t)]


# ---------------------------------------------------------------------- more states


@scenario("transactions")
def add_offsets_after_commit(k):
    """After a commit completes, AddOffsetsToTxn starts the next transaction."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    end(k, tid, pid, epoch, True)
    return [k.add_offsets_to_txn(tid, pid, epoch, k.name("g")), state(k, tid)]


@scenario("transactions")
def add_offsets_unknown_transactional_id(k):
    """AddOffsetsToTxn for a transactional id never initialised, and with a wrong producer id."""
    tid, pid, epoch = begin(k, "tx")
    return [k.add_offsets_to_txn(k.name("never"), 5, 0, k.name("g")),
            k.add_offsets_to_txn(tid, pid + 1000, epoch, k.name("g"))]


@scenario("transactions")
def list_duration_filter(k):
    """ListTransactions v1 duration filter: an hour (a transaction just begun is not listed) and -1 (no
    filter). Not 0: whether a transaction begun this millisecond is 'longer than 0 ms' is a race."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    m = mod(LIST_TRANSACTIONS, 1)
    return [k.send(m.ListTransactionsRequest(state_filters=(), producer_id_filters=(pid,), duration_filter=d))
            for d in (3_600_000, -1)]


@scenario("transactions")
def describe_producers_after_abort(k):
    """DescribeProducers after an aborted transaction: no open transaction, the marker's epoch."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    k.produce(t, txn_batch([b"x", b"y"], pid, epoch, 0), transactional_id=tid)
    end(k, tid, pid, epoch, False)
    return describe_producers(k, t)


@scenario("transactions")
def describe_producers_tv2_bump(k):
    """DescribeProducers after a TV2 commit: the producer's epoch is the bumped one the marker carries."""
    t = k.create_topic("t")
    tid, pid, epoch = begin(k, "tx")
    _tv2_produce(k, t, tid, pid, epoch, 0)
    end_v5(k, tid, pid, epoch, True)
    k.wait_txn_complete(tid)
    return describe_producers(k, t)
