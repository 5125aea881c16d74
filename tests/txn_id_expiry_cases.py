"""Transactional ids and producer ids expire, as a client sees it: the cases run against Apache
Kafka 4.4 (the reference, tests/kafka/test_txn_id_expiry_kafka.py, a node started with short
expirations) and against oncelog (tests/e2e/test_txn_id_expiry.py, which adds restarts). Each
broker runs with :data:`SETTINGS`: ``transactional.id.expiration.ms`` and
``producer.id.expiration.ms`` of :data:`EXPIRATION_MS`, checked every :data:`CHECK_MS`.

What a client sees once an idle transactional id expired (Kafka's TransactionStateManager and
TransactionCoordinator): DescribeTransactions answers TRANSACTIONAL_ID_NOT_FOUND and
ListTransactions leaves it out; its old producer is INVALID_PRODUCER_ID_MAPPING at
AddPartitionsToTxn and EndTxn; InitProducerId starts it afresh, a new producer id at epoch 0 — also
for a KIP-360 producer naming its old id and epoch (librdkafka's abort after the error does that),
so a transactional producer idle past the expiration recovers by aborting and goes on. An id
touched within the expiration stays. A producer id idle on a partition for
``producer.id.expiration.ms`` leaves DescribeProducers, and its next batch is accepted at any
sequence (KIP-360: an unknown producer)."""

from __future__ import annotations

import datetime
import time

import confluent_kafka as ck
from kio.schema.errors import ErrorCode

from oncelog.client.kafka import KafkaClient, KafkaProtocolError
from oncelog.client.wire import RawClient, request_module

EXPIRATION_MS = 2000
CHECK_MS = 300
SETTINGS = {
    "transactional.id.expiration.ms": str(EXPIRATION_MS),
    "transaction.remove.expired.transaction.cleanup.interval.ms": str(CHECK_MS),
    "producer.id.expiration.ms": str(EXPIRATION_MS),
    "producer.id.expiration.check.interval.ms": str(CHECK_MS),
}
TIMEOUT_MS = 60_000
WAIT_S = 60.0  # a generous bound: the waits below end as soon as the broker has expired the id


def wait_for(what: str, predicate, timeout: float = WAIT_S, interval: float = 0.1, keep_alive=None):
    """Poll ``predicate`` until true; ``keep_alive()`` is called on every round (an id a test
    keeps live by touching it well within the expiration)."""
    deadline = time.monotonic() + timeout
    while True:
        if keep_alive is not None:
            keep_alive()
        if predicate():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout:.0f} s")
        time.sleep(interval)


def described(bootstrap: str, txn_id: str) -> tuple[str, int, int] | None:
    """DescribeTransactions of ``txn_id`` at the one broker: (state, producer id, epoch), or
    None when not found."""
    m = request_module(65, 0)
    client = RawClient(bootstrap)
    try:
        [st] = client.request(m.DescribeTransactionsRequest(transactional_ids=(txn_id,))).transaction_states
    finally:
        client.close()
    if st.error_code == ErrorCode.transactional_id_not_found:
        return None
    assert st.error_code == ErrorCode.none, st
    return st.transaction_state, st.producer_id, st.producer_epoch


def listed(client: KafkaClient, txn_ids) -> set[str]:
    return {t for t, _, _ in client.list_transactions()} & set(txn_ids)


def committed_id(bootstrap: str, client: KafkaClient, txn_id: str, topic: str) -> tuple[int, int]:
    """A transactional id with one committed transaction (CompleteCommit); its (pid, epoch)."""
    pid, epoch = client.init_producer_id(txn_id, TIMEOUT_MS)
    client.add_partitions_to_txn(txn_id, pid, epoch, [(topic, 0)])
    assert client.end_txn(txn_id, pid, epoch, True) == ErrorCode.none
    wait_for(f"{txn_id} CompleteCommit", lambda: described(bootstrap, txn_id)[0] == "CompleteCommit")
    return pid, epoch


def touch(client: KafkaClient, txn_id: str) -> None:
    """A change of the id (an epoch bump): its expiration counts from now."""
    client.init_producer_id(txn_id, TIMEOUT_MS)


def check_an_idle_id_expires_and_a_touched_one_stays(bootstrap: str, topic: str, expired: str, live: str) -> dict:
    """The idle id ``expired`` (CompleteCommit) is forgotten; ``live``, touched meanwhile, stays.
    Returns what the old producer's AddPartitionsToTxn and EndTxn were answered, and the epoch of
    the producer id InitProducerId then gave it."""
    client = KafkaClient(bootstrap, client_id="txn-id-expiry")
    try:
        old_pid, old_epoch = committed_id(bootstrap, client, expired, topic)
        touch(client, live)
        assert listed(client, [expired, live]) == {expired, live}
        last_touch = [time.monotonic()]

        def keep_live():
            if time.monotonic() - last_touch[0] > EXPIRATION_MS / 4000:
                touch(client, live)
                last_touch[0] = time.monotonic()

        wait_for(f"{expired} expired", lambda: described(bootstrap, expired) is None, keep_alive=keep_live)
        assert listed(client, [expired, live]) == {live}
        assert described(bootstrap, live)[0] == "Empty"
        # the old producer is unknown now
        try:
            client.add_partitions_to_txn(expired, old_pid, old_epoch, [(topic, 0)])
            add_error = ErrorCode.none
        except KafkaProtocolError as exc:
            add_error = exc.code
        end_error = client.end_txn(expired, old_pid, old_epoch, True)
        # InitProducerId naming the old producer id and epoch (KIP-360, what librdkafka sends when
        # it bumps the epoch after an abortable error): a new producer id at epoch 0, as for a new
        # instance — not PRODUCER_FENCED
        m = request_module(22, 4)
        resp = client.call(client.coordinator(expired, 1), m.InitProducerIdRequest(
            transactional_id=expired, transaction_timeout=datetime.timedelta(milliseconds=TIMEOUT_MS),
            producer_id=old_pid, producer_epoch=old_epoch))
        assert resp.error_code == ErrorCode.none, resp
        assert resp.producer_id != old_pid
        return {"add": add_error, "end": end_error, "new_epoch": resp.producer_epoch}
    finally:
        client.close()


def check_a_transactional_producer_idle_past_the_expiration_recovers(bootstrap: str, topic: str,
                                                                      txn_id: str) -> list[bytes]:
    """confluent-kafka's transactional producer commits, sits idle until its id expired, then its
    next transaction fails with an abortable error (its producer id is unknown); it aborts, which
    re-initialises the producer (KIP-360), and the transaction after commits. Returns what a
    read_committed consumer reads."""
    client = KafkaClient(bootstrap, client_id="txn-id-expiry")
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 1,
                     "transaction.timeout.ms": TIMEOUT_MS})
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic, b"first", partition=0)
        p.commit_transaction(30)
        wait_for(f"{txn_id} expired", lambda: described(bootstrap, txn_id) is None)
        outcome = "committed"
        p.begin_transaction()
        p.produce(topic, b"second", partition=0)
        try:
            p.commit_transaction(30)
        except ck.KafkaException as exc:
            error = exc.args[0]
            assert error.txn_requires_abort() and not error.fatal(), error
            p.abort_transaction(30)
            outcome = "aborted"
        p.begin_transaction()
        p.produce(topic, b"third", partition=0)
        p.commit_transaction(30)
        assert outcome == "aborted"  # the second transaction could not commit under the forgotten id
        wait_for(f"{txn_id} CompleteCommit", lambda: (described(bootstrap, txn_id) or ("",))[0] == "CompleteCommit")
    finally:
        p.flush(5)
        client.close()
    return read_committed(bootstrap, topic, 2)


def read_committed(bootstrap: str, topic: str, n: int, timeout: float = 30.0) -> list[bytes]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{time.monotonic_ns()}",
                     "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, 0, 0)])
    out, deadline = [], time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            out.append(m.value())
    extra_until = time.monotonic() + 1.0  # nothing more arrives
    while time.monotonic() < extra_until:
        m = c.poll(0.1)
        if m is not None and not m.error():
            out.append(m.value())
    c.close()
    return out


def producers(bootstrap: str, topic: str, partition: int = 0) -> dict[int, int]:
    """DescribeProducers of one partition: {producer id: last sequence}."""
    m = request_module(61, 0)
    client = RawClient(bootstrap)
    try:
        resp = client.request(m.DescribeProducersRequest(
            topics=(m.TopicRequest(name=topic, partition_indexes=(partition,)),)))
    finally:
        client.close()
    [p] = resp.topics[0].partitions
    assert p.error_code == 0, p
    return {a.producer_id: a.last_sequence for a in p.active_producers}


def idempotent_producer(bootstrap: str) -> ck.Producer:
    return ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 1})


def produce(p: ck.Producer, topic: str, value: bytes) -> None:
    errors = []
    p.produce(topic, value, partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert errors == [None], errors


def check_an_idle_producer_id_expires_on_its_partition(bootstrap: str, topic: str) -> int:
    """An idempotent producer's id leaves DescribeProducers once idle for the expiration (a live
    one, writing meanwhile, stays); its next batch is accepted (an unknown producer may start at
    any sequence) and it is listed again. Returns the idle producer's id."""
    idle, live = idempotent_producer(bootstrap), idempotent_producer(bootstrap)
    produce(idle, topic, b"idle-1")
    produce(live, topic, b"live-1")
    held = producers(bootstrap, topic)
    assert len(held) == 2
    last_write = [time.monotonic()]

    def keep_live():
        if time.monotonic() - last_write[0] > EXPIRATION_MS / 4000:
            produce(live, topic, b"live")
            last_write[0] = time.monotonic()

    produce(live, topic, b"live-2")  # both wrote once: the idle one is the one still at sequence 0
    held = producers(bootstrap, topic)
    idle_pid = next(pid for pid, seq in held.items() if seq == 0)
    wait_for("the idle producer expired", lambda: idle_pid not in producers(bootstrap, topic), keep_alive=keep_live)
    assert len(producers(bootstrap, topic)) == 1
    produce(idle, topic, b"idle-2")  # its sequence goes on at 1: accepted as an unknown producer's
    assert producers(bootstrap, topic).get(idle_pid) == 1
    idle.flush(5)
    live.flush(5)
    return idle_pid
