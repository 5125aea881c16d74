"""What a test asserts on, read from any Kafka cluster through clients only (confluent-kafka and
the project's protocol client), never through broker internals: so the same assertion holds on
the embedded broker and on Apache Kafka (``--kafka-bootstrap``).

* :func:`create_topic` — CreateTopics, then wait until every partition has a leader;
* :func:`read_committed` — every record a read_committed consumer sees now, in offset order per
  partition (an independent reader: its own consumer, no group, no commits);
* :func:`transactions` — ListTransactions of every broker + DescribeTransactions of each id;
* :func:`groups` — ListGroups of every broker (+ member counts from the describe).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import namedtuple
from dataclasses import dataclass
from typing import Mapping

Record = namedtuple("Record", "topic partition offset key value headers")


@dataclass(frozen=True)
class Transaction:
    transactional_id: str
    state: str  # Kafka's names: Ongoing, PrepareCommit, CompleteCommit, CompleteAbort, Empty ...
    producer_id: int
    producer_epoch: int
    topic_partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Group:
    group_id: str
    state: str | None  # Stable, Empty, PreparingRebalance ... (Kafka's names)
    type: str | None  # classic, consumer, share, streams
    members: int


def _quiet() -> logging.Logger:
    quiet = logging.getLogger("oncelog.testing.librdkafka")
    quiet.propagate = False
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    return quiet


def create_topic(conf: Mapping, name: str, partitions: int = 1, config: Mapping | None = None,
                 timeout: float = 30.0) -> None:
    """Create ``name`` and return once every partition has a leader in Metadata."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({**conf, "logger": _quiet()})
    futures = admin.create_topics([NewTopic(name, partitions, replication_factor=-1,
                                            config={k: str(v) for k, v in (config or {}).items()})],
                                  request_timeout=timeout)
    futures[name].result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(name, timeout=timeout).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 for p in md.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name}: not every partition had a leader after {timeout} s")
        time.sleep(0.05)


def read_committed(conf: Mapping, topic: str, timeout: float = 30.0) -> list[Record]:
    """Every record of ``topic`` a read_committed consumer can read now: up to each partition's
    last stable offset (records of a transaction still open are not there yet, aborted ones
    never). Raises TimeoutError if the partitions' ends are not reached within ``timeout``."""
    import confluent_kafka as ck

    consumer = ck.Consumer({**conf, "group.id": f"oncelog-testing-reader-{uuid.uuid4().hex[:8]}",
                            "enable.auto.commit": False, "isolation.level": "read_committed",
                            "enable.partition.eof": True, "auto.offset.reset": "earliest", "logger": _quiet()})
    try:
        md = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if md is None or md.error is not None:
            raise ValueError(f"topic {topic}: {md.error if md is not None else 'not found'}")
        partitions = sorted(md.partitions)
        # The end a read_committed reader can reach: ListOffsets(latest) at read_committed is
        # the last stable offset (librdkafka asks at the consumer's isolation level).
        ends = {p: consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=timeout, cached=False)[1]
                for p in partitions}
        todo = {p for p in partitions if ends[p] > 0}
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in todo])
        out: list[Record] = []
        deadline = time.monotonic() + timeout
        while todo:
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic}: read_committed did not reach offsets {ends} in {timeout} s")
            for m in consumer.consume(500, 0.2):
                if m.error() is not None:
                    if m.error().code() == ck.KafkaError._PARTITION_EOF:
                        if m.offset() >= ends[m.partition()]:
                            todo.discard(m.partition())
                        continue
                    raise RuntimeError(f"topic {topic}: {m.error()}")
                out.append(Record(m.topic(), m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ())))
                if m.offset() + 1 >= ends[m.partition()]:
                    todo.discard(m.partition())
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def _protocol_client(bootstrap: str, properties: Mapping | None):
    from oncelog.client.kafka import KafkaClient

    return KafkaClient(bootstrap, {k: str(v) for k, v in (properties or {}).items()},
                       client_id="oncelog-testing", timeout=10)


def transactions(bootstrap: str, properties: Mapping | None = None) -> list[Transaction]:
    """Every transactional id the cluster's coordinators hold, described, sorted by id."""
    from oncelog import admin

    client = _protocol_client(bootstrap, properties)
    try:
        ids = sorted({t.transactional_id for t in admin.txn_list(client)})
        described = admin.txn_describe(client, ids) if ids else []
        return [Transaction(d.transactional_id, d.transaction_state, int(d.producer_id), int(d.producer_epoch),
                            tuple(sorted((t.topic, int(p)) for t in d.topics for p in t.partitions)))
                for d in sorted(described, key=lambda d: d.transactional_id)]
    finally:
        client.close()


def groups(bootstrap: str, properties: Mapping | None = None) -> list[Group]:
    """Every group of the cluster (ListGroups of every broker), with its member count."""
    from oncelog import admin

    client = _protocol_client(bootstrap, properties)
    try:
        out = []
        for g in admin.list_groups(client):
            try:
                members = len(admin.describe_group(client, g.group_id).members)
            except Exception:  # a group gone between the list and the describe
                members = 0
            out.append(Group(g.group_id, g.state, g.group_type, members))
        return out
    finally:
        client.close()
