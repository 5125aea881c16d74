"""One Python client version's row of the compatibility matrix (tests/kafka/test_client_versions.py),
run in a throwaway venv holding only that client (and on Python 3.10 where the version has no
newer wheels): ``python client_cell.py LIB BOOTSTRAP PREFIX`` with LIB one of confluent-kafka,
kafka-python, aiokafka. The test creates ``<prefix>idem``, ``<prefix>txn`` and ``<prefix>zip`` (2 partitions each)
beforehand. One JSON line per check on stdout, as ClientCell.java writes them:
{"check": NAME, "ok": true|false|null, "detail": ...}; ``null``: the client version has no such
feature (the same on both brokers, by construction).

  admin          create a topic with the client's admin API, see it listed
  idempotent     10 records with idempotence (acks=all), offsets 0..n-1 per partition, read back
  compressed     (confluent-kafka) gzip, lz4, snappy and zstd batches written and read back
  transactional  commit 5 / abort 3 / commit 4; read_committed reads the 9 committed, none aborted
  group-classic  a consumer group reads the idempotent topic's 10 records, commits, and its
                 committed offsets equal the end offsets
  group-consumer the same with group.protocol=consumer (KIP-848), where the client has it

Kept to Python 3.9 syntax: it runs on the venv's interpreter, not the test's.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import traceback

PARTITIONS = 2
DEADLINE = 60.0


def emit(check, fn):
    try:
        detail = fn()
        ok = detail is not None
        if detail is None:
            detail = "not in this client version"
            ok = None
    except Exception as exc:  # noqa: BLE001 - the check's failure is its answer
        traceback.print_exc()
        ok, detail = False, f"{type(exc).__name__}: {exc}"
    print(json.dumps({"check": check, "ok": ok, "detail": str(detail)}), flush=True)


def require(cond, what):
    if not cond:
        raise AssertionError(what)


def contiguous(offsets):
    for p, got in offsets.items():
        require(sorted(got) == list(range(len(got))), f"partition {p} offsets {sorted(got)}")


# ---------------------------------------------------------------------------------- confluent-kafka


def confluent(bootstrap, prefix):
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    version = tuple(int(x) for x in ck.libversion()[0].split(".")[:2])  # librdkafka's
    base = {"bootstrap.servers": bootstrap}

    def admin():
        a = AdminClient(base)
        md = a.list_topics(timeout=30)
        require(md.brokers, "no broker in the metadata")
        for f in a.create_topics([NewTopic(prefix + "adm", PARTITIONS, 1)]).values():
            f.result(30)
        deadline = time.time() + DEADLINE
        while prefix + "adm" not in a.list_topics(timeout=30).topics:
            require(time.time() < deadline, "the new topic is not listed")
            time.sleep(0.1)
        return f"brokers={len(md.brokers)}"

    def read(topic, isolation, expected, group=None, protocol=None):
        conf = dict(base, **{"isolation.level": isolation, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "group.id": group or (prefix + "reader")})
        if protocol == "consumer":
            conf["group.protocol"] = "consumer"
        c = ck.Consumer(conf)
        tps = [ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)]
        ends = {p: c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)}
        if group:
            c.subscribe([topic])
        else:
            c.assign(tps)
        values = []
        deadline = time.time() + DEADLINE
        while time.time() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                values.append(m.value().decode())
            assigned = c.assignment()
            positions = c.position(assigned) if assigned else []
            # an empty partition's position stays invalid (-1001) until a fetch moves it
            if len(assigned) == PARTITIONS and len(values) >= expected and \
                    all(tp.offset >= ends[tp.partition] or ends[tp.partition] == 0 for tp in positions):
                break
        committed = None
        if group:
            c.commit(asynchronous=False)
            committed = {tp.partition: tp.offset for tp in
                         c.committed([ck.TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)}
        c.close()
        return values, ends, committed

    def idempotent():
        p = ck.Producer(dict(base, **{"enable.idempotence": True, "acks": "all"}))
        offsets = {}

        def done(err, msg):
            require(err is None, f"delivery failed: {err}")
            offsets.setdefault(msg.partition(), []).append(msg.offset())

        for i in range(10):
            p.produce(prefix + "idem", value=f"i{i}", key=f"k{i}", partition=i % PARTITIONS, on_delivery=done)
        require(p.flush(DEADLINE) == 0, "records still in flight")
        contiguous(offsets)
        values, _, _ = read(prefix + "idem", "read_uncommitted", 10)
        require(sorted(values) == sorted(f"i{i}" for i in range(10)), f"read back {values}")
        return f"offsets {sorted(offsets.items())}"

    def compressed():
        # KAFKA-18659 ("librdkafka compressed produce fails unless api versions returns produce
        # v0") is why Kafka 4 advertises Produce from v0, and so does oncelog; the test reads the
        # batches' codecs off the log, so a client that turned compression off would show.
        got = {}
        for codec in ("gzip", "lz4", "snappy", "zstd"):
            p = ck.Producer(dict(base, **{"compression.type": codec, "acks": "all", "linger.ms": 5}))
            errors = []
            for i in range(5):
                p.produce(prefix + "zip", value=f"{codec}-{i}" * 20, partition=i % PARTITIONS,
                          on_delivery=lambda err, msg: errors.append(err) if err else None)
            require(p.flush(DEADLINE) == 0 and not errors, f"{codec}: {errors}")
            got[codec] = 5
        values, _, _ = read(prefix + "zip", "read_uncommitted", 20)
        require(len(values) == 20, f"read back {len(values)} of 20")
        return "gzip, lz4, snappy, zstd batches written and read back"

    def transactional():
        p = ck.Producer(dict(base, **{"transactional.id": prefix + "txn-id", "transaction.timeout.ms": 60000}))
        p.init_transactions(DEADLINE)
        committed = set()
        for t, n in enumerate((5, 3, 4)):
            p.begin_transaction()
            for i in range(n):
                p.produce(prefix + "txn", value=f"t{t}-{i}", key=f"k{i}", partition=i % PARTITIONS)
                if t != 1:
                    committed.add(f"t{t}-{i}")
            if t == 1:
                p.flush(DEADLINE)
                p.abort_transaction(DEADLINE)
            else:
                p.commit_transaction(DEADLINE)
        values, _, _ = read(prefix + "txn", "read_committed", len(committed))
        require(sorted(values) == sorted(committed), f"read_committed read {values}")
        return "read_committed read the 9 committed records, none of the 3 aborted"

    def group(protocol):
        def run():
            if protocol == "consumer" and version < (2, 10):
                return None  # KIP-848 is GA in librdkafka 2.10 (the broker must enable it: both do)
            values, ends, committed = read(prefix + "idem", "read_committed", 10, group=prefix + "g-" + protocol,
                                           protocol=protocol)
            require(len(values) == 10, f"the group read {len(values)} records")
            require(committed == ends, f"committed {committed}, end offsets {ends}")
            return "read 10, committed offsets = end offsets"
        return run

    return [("admin", admin), ("idempotent", idempotent), ("compressed", compressed), ("transactional", transactional),
            ("group-classic", group("classic")), ("group-consumer", group("consumer"))]


# ---------------------------------------------------------------------------------- kafka-python


def kafka_python(bootstrap, prefix):
    import kafka
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    has_idempotence = "enable_idempotence" in KafkaProducer.DEFAULT_CONFIG
    has_txn = "transactional_id" in KafkaProducer.DEFAULT_CONFIG
    has_isolation = "isolation_level" in KafkaConsumer.DEFAULT_CONFIG

    def admin():
        a = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
        a.create_topics([NewTopic(prefix + "adm", PARTITIONS, 1)])
        deadline = time.time() + DEADLINE
        while prefix + "adm" not in a.list_topics():
            require(time.time() < deadline, "the new topic is not listed")
            time.sleep(0.1)
        a.close()
        return "created and listed"

    def read(topic, expected, group=None, isolation="read_committed"):
        kw = {"bootstrap_servers": bootstrap, "enable_auto_commit": False, "auto_offset_reset": "earliest"}
        if has_isolation:
            kw["isolation_level"] = isolation
        if group:
            kw["group_id"] = group
            kw["metadata_max_age_ms"] = 1000  # its next metadata update comes soon after subscribe (below)
        c = KafkaConsumer(**kw)
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        ends = {tp.partition: o for tp, o in c.end_offsets(tps).items()}
        if group:
            c.subscribe([topic])
            # kafka-python 3.0's leader assigns from its coordinator's metadata snapshot; empty
            # (taken before subscribe), the next update starts a second round, and one that
            # outlives its poll leaves the consumer rebalancing for good, every commit refused.
            # A client bug: wait for the snapshot, which 3.0's background thread updates at the
            # next metadata update (within metadata_max_age_ms); 2.x updates it only in poll.
            coordinator = c._coordinator
            deadline = time.time() + DEADLINE
            while int(kafka.__version__.split(".")[0]) >= 3 and not coordinator._metadata_snapshot.get(topic):
                require(time.time() < deadline, "kafka-python's coordinator never had the topic's partitions")
                time.sleep(0.05)
        else:
            c.assign(tps)
            c.seek_to_beginning(*tps)
        values = []
        deadline = time.time() + DEADLINE
        while time.time() < deadline:
            for records in c.poll(timeout_ms=200).values():
                values += [r.value.decode() for r in records]
            assigned = c.assignment()
            if len(assigned) == PARTITIONS and all(c.position(tp) >= ends[tp.partition] for tp in assigned) \
                    and len(values) >= expected:
                break
        committed = None
        if group:
            c.commit()
            committed = {tp.partition: c.committed(tp) for tp in tps}
        c.close()
        return values, ends, committed

    def idempotent():
        if not has_idempotence:
            return None
        p = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
        offsets = {}
        for i in range(10):
            md = p.send(prefix + "idem", value=f"i{i}".encode(), key=f"k{i}".encode(), partition=i % PARTITIONS).get(60)
            offsets.setdefault(md.partition, []).append(md.offset)
        p.close()
        contiguous(offsets)
        values, _, _ = read(prefix + "idem", 10, isolation="read_uncommitted")
        require(sorted(values) == sorted(f"i{i}" for i in range(10)), f"read back {values}")
        return f"offsets {sorted(offsets.items())}"

    def plain_idem_topic():  # the group check's input where the client has no idempotence
        p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        for i in range(10):
            p.send(prefix + "idem", value=f"i{i}".encode(), key=f"k{i}".encode(), partition=i % PARTITIONS).get(60)
        p.close()

    def transactional():
        if not (has_txn and has_isolation):
            return None
        p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=prefix + "txn-id")
        p.init_transactions()
        committed = set()
        for t, n in enumerate((5, 3, 4)):
            p.begin_transaction()
            for i in range(n):
                p.send(prefix + "txn", value=f"t{t}-{i}".encode(), key=f"k{i}".encode(), partition=i % PARTITIONS)
                if t != 1:
                    committed.add(f"t{t}-{i}")
            if t == 1:
                p.flush()
                p.abort_transaction()
            else:
                p.commit_transaction()
        p.close()
        values, _, _ = read(prefix + "txn", len(committed))
        require(sorted(values) == sorted(committed), f"read_committed read {values}")
        return "read_committed read the 9 committed records, none of the 3 aborted"

    def group_classic():
        if not has_idempotence:
            plain_idem_topic()
        values, ends, committed = read(prefix + "idem", 10, group=prefix + "g-classic")
        require(len(values) == 10, f"the group read {len(values)} records")
        require(committed == ends, f"committed {committed}, end offsets {ends}")
        return "read 10, committed offsets = end offsets"

    return [("admin", admin), ("idempotent", idempotent), ("transactional", transactional),
            ("group-classic", group_classic), ("group-consumer", lambda: None)]


# ---------------------------------------------------------------------------------- aiokafka


def aiokafka(bootstrap, prefix):
    import aiokafka as ak
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    def run(coro):
        return asyncio.get_event_loop().run_until_complete(coro)

    def admin():
        try:
            from aiokafka.admin import AIOKafkaAdminClient, NewTopic
        except ImportError:
            return None

        async def go():
            a = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
            await a.start()
            try:
                await a.create_topics([NewTopic(prefix + "adm", PARTITIONS, 1)])
                deadline = time.time() + DEADLINE
                while prefix + "adm" not in await a.list_topics():
                    require(time.time() < deadline, "the new topic is not listed")
                    await asyncio.sleep(0.1)
            finally:
                await a.close()
            return "created and listed"
        return run(go())

    async def read(topic, expected, group=None, isolation="read_committed"):
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                             auto_offset_reset="earliest", group_id=group)
        await c.start()
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        try:
            ends = {tp.partition: o for tp, o in (await c.end_offsets(tps)).items()}
            if group:
                c.subscribe([topic])
            else:
                c.assign(tps)
                await c.seek_to_beginning(*tps)
            values = []
            deadline = time.time() + DEADLINE
            while time.time() < deadline:
                for records in (await c.getmany(timeout_ms=200)).values():
                    values += [r.value.decode() for r in records]
                assigned = c.assignment()
                if len(assigned) == PARTITIONS and len(values) >= expected and \
                        all([(await c.position(tp)) >= ends[tp.partition] for tp in assigned]):
                    break
            committed = None
            if group:
                await c.commit()
                committed = {tp.partition: await c.committed(tp) for tp in tps}
        finally:
            await c.stop()
        return values, ends, committed

    def idempotent():
        async def go():
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
            await p.start()
            offsets = {}
            try:
                for i in range(10):
                    md = await p.send_and_wait(prefix + "idem", value=f"i{i}".encode(), key=f"k{i}".encode(),
                                               partition=i % PARTITIONS)
                    offsets.setdefault(md.partition, []).append(md.offset)
            finally:
                await p.stop()
            contiguous(offsets)
            values, _, _ = await read(prefix + "idem", 10, isolation="read_uncommitted")
            require(sorted(values) == sorted(f"i{i}" for i in range(10)), f"read back {values}")
            return f"offsets {sorted(offsets.items())}"
        return run(go())

    def transactional():
        async def go():
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=prefix + "txn-id")
            await p.start()
            committed = set()
            try:
                for t, n in enumerate((5, 3, 4)):
                    await p.begin_transaction()
                    futures = []
                    for i in range(n):
                        futures.append(await p.send(prefix + "txn", value=f"t{t}-{i}".encode(),
                                                    key=f"k{i}".encode(), partition=i % PARTITIONS))
                        if t != 1:
                            committed.add(f"t{t}-{i}")
                    await asyncio.gather(*futures)
                    if t == 1:
                        await p.abort_transaction()
                    else:
                        await p.commit_transaction()
            finally:
                await p.stop()
            values, _, _ = await read(prefix + "txn", len(committed))
            require(sorted(values) == sorted(committed), f"read_committed read {values}")
            return "read_committed read the 9 committed records, none of the 3 aborted"
        return run(go())

    def group_classic():
        async def go():
            values, ends, committed = await read(prefix + "idem", 10, group=prefix + "g-classic")
            require(len(values) == 10, f"the group read {len(values)} records")
            require(committed == ends, f"committed {committed}, end offsets {ends}")
            return "read 10, committed offsets = end offsets"
        return run(go())

    del ak
    return [("admin", admin), ("idempotent", idempotent), ("transactional", transactional),
            ("group-classic", group_classic), ("group-consumer", lambda: None)]


LIBRARIES = {"confluent-kafka": confluent, "kafka-python": kafka_python, "aiokafka": aiokafka}

if __name__ == "__main__":
    lib, bootstrap, prefix = sys.argv[1:4]
    if lib == "aiokafka":
        asyncio.set_event_loop(asyncio.new_event_loop())
    for name, check in LIBRARIES[lib](bootstrap, prefix):
        emit(name, check)
