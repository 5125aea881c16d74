"""Kafka behaviours real clients' own test suites still miss, each against a real
broker process and a real client."""

from __future__ import annotations

import datetime
import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient

from oncelog.client.wire import RawClient, request_module

from ..helpers import create_topic


# ---------------------------------------------------------------- 1. one request at a time


def _delete_records_request(topic: str, offset: int):
    m = request_module(21, 2)
    return m.DeleteRecordsRequest(
        topics=(m.DeleteRecordsTopic(name=topic, partitions=(m.DeleteRecordsPartition(partition_index=0, offset=offset),)),),
        timeout=datetime.timedelta(seconds=10))


def _list_offsets_earliest_request(topic: str):
    m = request_module(2, 7)
    return m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
        m.ListOffsetsTopic(name=topic, partitions=(
            m.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-2),)),))


def test_pipelined_list_offsets_sees_the_delete_records_before_it(broker):
    """DeleteRecords then ListOffsets(EARLIEST) sent back to back on one connection, without
    waiting for the first response: the ListOffsets must answer the new log start, every time."""
    topic = "pipelined-delete"
    create_topic(broker.bootstrap, topic, 1)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(200):
        p.produce(topic, value=b"v%d" % i, partition=0)
        p.flush()  # one batch per record, so every offset is a possible log start
    c = RawClient(broker.bootstrap)
    try:
        seen = []
        for attempt in range(10):
            target = 10 * (attempt + 1)
            delete = c.encode(_delete_records_request(topic, target))
            listing = c.encode(_list_offsets_earliest_request(topic))
            c.sock.sendall(b"".join(len(f).to_bytes(4, "big") + f for f in (delete, listing)))
            cid = c.correlation_id
            c.correlation_id = cid - 1
            deleted = c.read_response(type(_delete_records_request(topic, 0)))
            c.correlation_id = cid
            earliest = c.read_response(type(_list_offsets_earliest_request(topic)))
            dp = deleted.topics[0].partitions[0]
            assert dp.error_code.value == 0 and dp.low_watermark == target, dp
            lp = earliest.topics[0].partitions[0]
            assert lp.error_code.value == 0, lp
            seen.append((target, lp.offset))
        assert all(start == target for target, start in seen), seen
    finally:
        c.close()


# ---------------------------------------------------------------- 2. fetch.max.bytes (KIP-74)


def test_fetch_max_bytes_is_honoured_across_partitions(broker):
    """A consumer with a small fetch.max.bytes (and receive.message.max.bytes just above it, so
    librdkafka rejects any larger response with "Invalid response size") reads several
    partitions of ~60 KB batches: every record arrives, with no error."""
    topic, partitions, per_partition = "fetch-max-bytes", 6, 400
    create_topic(broker.bootstrap, topic, partitions)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200, "batch.size": 60_000,
                     "compression.type": "none", "acks": "all"})
    value = bytes(1000)
    for part in range(partitions):
        for i in range(per_partition):
            p.produce(topic, key=b"%d-%d" % (part, i), value=value, partition=part)
    assert p.flush(30) == 0
    fetch_max = 100_000
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fetch-max-bytes-reader",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "fetch.max.bytes": fetch_max, "message.max.bytes": 70_000,
                     "receive.message.max.bytes": fetch_max + 2048,
                     "fetch.wait.max.ms": 100})
    errors_seen = []
    c.assign([ck.TopicPartition(topic, part, 0) for part in range(partitions)])
    got: dict[int, list[int]] = {part: [] for part in range(partitions)}
    total = partitions * per_partition
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, got.values())) < total and time.monotonic() < deadline and not errors_seen:
            for m in c.consume(1000, 0.5):
                if m.error():
                    errors_seen.append(str(m.error()))
                    continue
                got[m.partition()].append(m.offset())
    finally:
        c.close()
    assert not errors_seen, errors_seen[:3]
    for part in range(partitions):
        assert got[part] == list(range(per_partition)), (part, len(got[part]))


# ---------------------------------------------------------------- 3. group.initial.rebalance.delay.ms


def test_initial_rebalance_delay_forms_one_generation_for_members_joining_together(broker_factory):
    """With group.initial.rebalance.delay.ms, consumers that join an empty group within the
    delay of each other are all in its first generation: each one's first assignment is its
    final share (no consumer first gets every partition and then gives some back)."""
    delay_ms = 2000
    b = broker_factory(group_initial_rebalance_delay_ms=delay_ms)
    topic, partitions, members = "initial-delay", 6, 3
    create_topic(b.bootstrap, topic, partitions)
    events: dict[int, list] = {i: [] for i in range(members)}
    consumers = []
    started = time.monotonic()
    try:
        for i in range(members):
            c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "initial-delay-group",
                             "session.timeout.ms": 10_000, "heartbeat.interval.ms": 500,
                             "enable.auto.commit": False, "partition.assignment.strategy": "range"})
            c.subscribe([topic],
                        on_assign=lambda _c, ps, i=i: events[i].append(("assign", time.monotonic(), len(ps))),
                        on_revoke=lambda _c, ps, i=i: events[i].append(("revoke", time.monotonic(), len(ps))))
            consumers.append(c)
            # Members arrive 500 ms apart (each within the delay of the one before).
            until = time.monotonic() + 0.5
            while time.monotonic() < until:
                for other in consumers:
                    other.poll(0.05)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(events[i] for i in range(members)):
            for c in consumers:
                c.poll(0.05)
        for c in consumers:  # a little longer: any second rebalance would show up here
            c.poll(0.5)
    finally:
        for c in consumers:
            c.close()
    firsts = [events[i][0] for i in range(members)]
    assert all(kind == "assign" for kind, _, _ in firsts), events
    assert [n for _, _, n in firsts] == [partitions // members] * members, events
    # The first generation was formed no earlier than the delay after the first join.
    assert min(t for _, t, _ in firsts) - started >= delay_ms / 1000 - 0.1, (started, events)


def _raw_join(client: RawClient, group: str, member_id: str = ""):
    m = request_module(11, 5)
    req = m.JoinGroupRequest(group_id=group, session_timeout=datetime.timedelta(seconds=10),
                             rebalance_timeout=datetime.timedelta(seconds=10),
                             member_id=member_id, group_instance_id=None, protocol_type="consumer",
                             protocols=(m.JoinGroupRequestProtocol(name="range", metadata=b""),))
    return client.request(req)


def test_initial_delay_expires_on_time_not_on_a_poll(broker_factory):
    """The coordinator's deadlines are loop timers: a lone member's first JoinGroup is answered
    right at the end of the initial delay (a 100 ms poll would add 50 ms on average)."""
    delay_ms = 300
    b = broker_factory(group_initial_rebalance_delay_ms=delay_ms)
    late = []
    for i in range(8):
        c = RawClient(b.bootstrap)
        try:
            first = _raw_join(c, f"timer-group-{i}")  # KIP-394: MEMBER_ID_REQUIRED, with an id
            assert first.error_code.value == 79, first
            t0 = time.monotonic()
            resp = _raw_join(c, f"timer-group-{i}", first.member_id)
            elapsed_ms = (time.monotonic() - t0) * 1000
        finally:
            c.close()
        assert resp.error_code.value == 0 and resp.generation_id == 1, resp
        assert elapsed_ms >= delay_ms - 5, elapsed_ms
        late.append(elapsed_ms - delay_ms)
    late.sort()
    assert late[len(late) // 2] < 30, late


def test_initial_delay_extends_while_members_join_and_is_capped_by_the_rebalance_timeout():
    """The coordinator's InitialDelayedJoin arithmetic, on a fake clock (as Kafka: each expiry
    with a new member meanwhile waits min(delay, remaining) more; never past the rebalance
    timeout)."""
    from kio.schema.errors import ErrorCode

    from oncelog.apis._groups import error_code
    from oncelog.config.settings import GroupConfig
    from oncelog.groups.coordinator import GroupCoordinator

    now = [0]
    coord = GroupCoordinator(lambda: now[0], lambda _g, _r, on_done: on_done(None),
                             GroupConfig(initial_rebalance_delay_ms=3000))
    answers = {}

    def join(name):
        coord.join(group_id="g", member_id="", group_instance_id=None, client_id=name, client_host="h",
                   session_timeout_ms=10_000, rebalance_timeout_ms=7000, protocol_type="consumer",
                   protocols=[("range", b"")], require_known_member_id=False,
                   respond=lambda r, name=name: answers.__setitem__(name, (now[0], r)))

    def advance_to(t):
        while now[0] < t:
            now[0] += 100
            coord.tick()

    join("a")
    advance_to(2000)
    join("b")               # joined during the first delay: extended at 3000 to 6000
    advance_to(5000)
    join("c")               # joined again: extended at 6000 by min(3000, 7000 - 6000) = 1000
    advance_to(6900)
    assert answers == {}
    advance_to(7000)
    assert sorted(answers) == ["a", "b", "c"]
    assert {t for t, _ in answers.values()} == {7000}
    assert {r.generation for _, r in answers.values()} == {1}
    assert all(error_code(r.error) == ErrorCode.none for _, r in answers.values())


# ---------------------------------------------------------------- 4. producer state outlives DeleteRecords


def test_idempotent_producer_keeps_its_sequence_after_delete_records_to_the_end(broker):
    """Produce with an idempotent confluent-kafka producer, DeleteRecords up to the end (every
    batch of the producer gone), produce again with the same producer: no error (no
    UNKNOWN_PRODUCER_ID), nothing duplicated; and the state survives a broker SIGKILL."""
    topic = "delete-records-producer"
    create_topic(broker.bootstrap, topic, 1)
    errors_seen = []

    def on_error(e):  # the broker SIGKILL below is expected to show as transport errors
        if e.code() not in (ck.KafkaError._TRANSPORT, ck.KafkaError._ALL_BROKERS_DOWN):
            errors_seen.append(str(e))

    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5,
                     "error_cb": on_error})
    delivered = []

    def on_delivery(err, msg):
        if err is not None:
            errors_seen.append(str(err))
        else:
            delivered.append(msg.offset())

    def produce(start, n):
        for i in range(start, start + n):
            p.produce(topic, value=b"%d" % i, partition=0, on_delivery=on_delivery)
        assert p.flush(30) == 0

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def delete_to_end():
        fut = admin.delete_records([ck.TopicPartition(topic, 0, ck.OFFSET_END)])
        return next(iter(fut.values())).result(30).low_watermark

    def producer_on_partition():
        m = request_module(61, 0)
        c = RawClient(broker.bootstrap)
        try:
            resp = c.request(m.DescribeProducersRequest(topics=(m.TopicRequest(name=topic, partition_indexes=(0,)),)))
        finally:
            c.close()
        return [(x.producer_id, x.producer_epoch, x.last_sequence) for x in resp.topics[0].partitions[0].active_producers]

    produce(0, 100)
    (pid, epoch, last_seq), = producer_on_partition()
    assert last_seq == 99
    assert delete_to_end() == 100
    produce(100, 100)
    # Same producer id and epoch, the sequence continued: the broker did not answer
    # UNKNOWN_PRODUCER_ID (librdkafka would have recovered by bumping its epoch, KIP-360).
    assert producer_on_partition() == [(pid, epoch, 199)]
    assert delete_to_end() == 200
    broker.kill()
    broker.restart()
    produce(200, 100)
    p.flush(10)
    assert not errors_seen, errors_seen[:3]
    assert delivered == list(range(300))
    assert producer_on_partition() == [(pid, epoch, 299)]
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dr-reader", "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, 0, 200)])
    values = []
    deadline = time.monotonic() + 30
    try:
        while len(values) < 100 and time.monotonic() < deadline:
            for m in c.consume(100, 0.5):
                assert not m.error(), m.error()
                values.append((m.offset(), m.value()))
        for m in c.consume(100, 1.0):  # nothing more (no duplicate)
            values.append((m.offset(), m.value()))
    finally:
        c.close()
    assert values == [(200 + i, b"%d" % (200 + i)) for i in range(100)]
