"""oncelog's codec of consumer (KIP-848) group records (:mod:`oncelog.groups.consumer_records`)
against what Apache Kafka 4.4 itself writes in ``__consumer_offsets``.

Real clients make Kafka write every kind of record: confluent-kafka consumers with
``group.protocol=consumer`` — A subscribed by name, which commits an offset, then B, a static
member subscribed by a regular expression, so that A must revoke partitions — and C, a classic-
protocol consumer joining the same group (Kafka keeps its JoinGroup protocols in the member
record). All three leave. The topic is then read raw (a plain assign of every partition from the
start) and every record of the group decoded with oncelog's codec. Checked:

- the record types seen: 3, 5, 6, 7, 8 and 16; the keys of every member-scoped record name one of
  the member ids the clients report, and Kafka's tombstones delete all of them;
- each member record holds its client id and subscription; topic ids are the topic's (as Admin
  describes it); the last target assignments before the first leave split the partitions as the
  clients saw them; A's current assignment went through partitions pending revocation; member epochs never
  exceed the group epoch recorded before them;
- every value re-encodes to exactly Kafka's bytes, and every key too.

And the other way: Kafka's own serde (GroupCoordinatorRecordSerde, in a small Java program)
reads every record oncelog's codec writes in the unit tests — each field at its edges, the
classic member metadata, assignment epochs on some topics — and serializes it again to the same
bytes, and its JSON rendering of each value is the dataclass's.
"""

from __future__ import annotations

import base64
import json
import time
import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

from oncelog import apache_kafka
from oncelog.groups import consumer_records as cr
from oncelog.groups.records import GroupKey, OffsetKey, decode_key

from ..groups.test_consumer_records import KAFKA_RECORDS, ROUND_TRIPS
from ..helpers import create_topic, need_apache_kafka, unique, wait_for_partitions

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]

PARTITIONS = 6  # below Java's HashSet table size: Kafka writes partitions ascending, as we do


def _topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tid = admin.describe_topics(ck.TopicCollection([topic]))[topic].result(timeout=30).topic_id
    mask = (1 << 64) - 1
    return uuid.UUID(int=((tid.get_most_significant_bits() & mask) << 64) | (tid.get_least_significant_bits() & mask))


def _consumer(bootstrap: str, group: str, client_id: str, protocol: str = "consumer", **extra) -> ck.Consumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id, "group.protocol": protocol,
            "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra}
    return ck.Consumer(conf)


def _poll_until(consumers: list[ck.Consumer], done, what: str, timeout: float = 90.0) -> None:
    """Poll every consumer (they reconcile, revoke and rejoin only while polled) until ``done()``."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            sizes = [len(c.assignment()) for c in consumers]
            raise AssertionError(f"{what}: not reached in {timeout:.0f} s (assignment sizes {sizes})")
        for c in consumers:
            c.poll(0.1)


def _read_offsets_topic(bootstrap: str) -> list[tuple[bytes, bytes | None]]:
    """Every record of ``__consumer_offsets``, each partition from its start to its end."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = admin.list_topics("__consumer_offsets", timeout=30).topics["__consumer_offsets"].partitions
    reader = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("raw-reader"),
                          "enable.auto.commit": False, "enable.partition.eof": True})
    reader.assign([ck.TopicPartition("__consumer_offsets", p, ck.OFFSET_BEGINNING) for p in partitions])
    records, at_end = [], set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < len(partitions):
            assert time.monotonic() < deadline, f"__consumer_offsets not read to its end: {len(at_end)} partitions"
            msg = reader.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == ck.KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            records.append((msg.key(), msg.value()))
    finally:
        reader.close()
    return records


def test_kafka_written_consumer_group_records_decode_and_reencode_byte_for_byte(apache_kafka):
    bootstrap = apache_kafka.bootstrap
    topic, group = unique("records"), unique("records-group")
    create_topic(bootstrap, topic, PARTITIONS)
    wait_for_partitions(bootstrap, topic, PARTITIONS)
    topic_id = _topic_id(bootstrap, topic)
    producer = ck.Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"x", partition=0)
    assert producer.flush(30) == 0

    # A alone: every partition, reads the record, commits after it
    a = _consumer(bootstrap, group, "client-a")
    a.subscribe([topic])
    msg = None
    deadline = time.monotonic() + 90
    while msg is None or msg.error():
        assert time.monotonic() < deadline, "A read nothing"
        msg = a.poll(0.5)
    a.commit(message=msg, asynchronous=False)
    _poll_until([a], lambda: len(a.assignment()) == PARTITIONS, "A owns every partition")
    # B, static, by regex: A revokes half
    b = _consumer(bootstrap, group, "client-b", **{"group.instance.id": "instance-b"})
    b.subscribe([f"^{topic}$"])
    _poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == PARTITIONS // 2, "A and B share")
    # C, a classic-protocol consumer, joins the same group
    c = _consumer(bootstrap, group, "client-c", protocol="classic", **{"session.timeout.ms": 10000})
    c.subscribe([topic])
    members = [a, b, c]
    _poll_until(members, lambda: all(len(m.assignment()) == PARTITIONS // 3 for m in members), "A, B and C share")
    member_ids = {m.memberid(): name for m, name in zip(members, "abc")}
    owned = {name: {tp.partition for tp in m.assignment()} for m, name in zip(members, "abc")}
    assert len(member_ids) == 3 and set().union(*owned.values()) == set(range(PARTITIONS))
    for m in members:
        m.close()

    records = []
    for key_bytes, value_bytes in _read_offsets_topic(bootstrap):
        key = decode_key(key_bytes)
        if getattr(key, "group", None) == group:
            records.append((key, key_bytes, value_bytes))
    assert records, "Kafka wrote nothing for the group"

    # Kafka's bytes, decoded and re-encoded
    decoded = []
    for key, key_bytes, value_bytes in records:
        if isinstance(key, (OffsetKey, GroupKey)):
            assert isinstance(key, OffsetKey) and key == OffsetKey(group, topic, 0)  # A's commit
            continue
        assert isinstance(key, cr.CONSUMER_KEYS), key
        assert cr.encode_consumer_key(key) == key_bytes
        value = None if value_bytes is None else cr.decode_consumer_value(key, value_bytes)
        if value is not None:
            assert cr.encode_consumer_value(value) == value_bytes, (key, value, value_bytes.hex())
        decoded.append((key, value))
    types = {cr._KEY_TYPES[type(k)] for k, _ in decoded}
    assert types >= {3, 5, 6, 7, 8, 16}, types

    # member-scoped records name the clients' members; every one ends in a tombstone except the
    # static member's assignment and metadata (a static member's leave keeps them, epoch -2)
    last: dict = {}
    for key, value in decoded:
        if hasattr(key, "member_id"):
            assert key.member_id in member_ids, key
        last[key] = value
    for key, value in last.items():
        if hasattr(key, "member_id") and member_ids[key.member_id] != "b":
            assert value is None, (key, value)

    metadata = {member_ids[k.member_id]: v for k, v in decoded
                if isinstance(k, cr.ConsumerGroupMemberMetadataKey) and v is not None}
    assert {name: v.client_id for name, v in metadata.items()} == {"a": "client-a", "b": "client-b", "c": "client-c"}
    assert metadata["a"].subscribed_topic_names == (topic,) and metadata["a"].classic_member_metadata is None
    assert metadata["b"].instance_id == "instance-b" and metadata["b"].subscribed_topic_names == ()
    regex = metadata["b"].subscribed_topic_regex
    assert regex is not None and topic in regex  # librdkafka sends it parenthesised
    regexes = [(k, v) for k, v in decoded if isinstance(k, cr.ConsumerGroupRegularExpressionKey) and v is not None]
    assert regexes and all(k.regex == regex and v.topics == (topic,) for k, v in regexes)
    classic = metadata["c"].classic_member_metadata
    assert classic is not None and classic.session_timeout_ms == 10000
    assert classic.supported_protocols and all(topic.encode() in meta for _, meta in classic.supported_protocols)

    # topic ids and partitions: the last target assignment before the first leave (after it, the
    # members still heartbeating may get a new one) is what the clients held
    first_leave = next(i for i, (k, v) in enumerate(decoded) if v is None or (
        isinstance(k, cr.ConsumerGroupCurrentMemberAssignmentKey) and v.member_epoch < 0))
    steady = decoded[:first_leave]
    targets = {member_ids[k.member_id]: v.topic_partitions for k, v in steady
               if isinstance(k, cr.ConsumerGroupTargetAssignmentMemberKey)}
    assert targets == {name: {topic_id: frozenset(parts)} for name, parts in owned.items()}
    currents = [(member_ids[k.member_id], v) for k, v in steady
                if isinstance(k, cr.ConsumerGroupCurrentMemberAssignmentKey)]
    for _, v in currents:
        assert set(v.assigned_partitions) | set(v.partitions_pending_revocation) <= {topic_id}
    assert any(name == "a" and v.partitions_pending_revocation and v.state == 1 for name, v in currents)
    assert any(name == "a" and v.assigned_partitions.get(topic_id) == frozenset(owned["a"]) for name, v in currents)

    # epochs: a member's epoch is never above the group epoch written before it; assignment
    # epochs never above the member's
    group_epoch = 0
    for key, value in decoded:
        if isinstance(key, cr.ConsumerGroupMetadataKey) and value is not None:
            assert value.epoch > group_epoch
            group_epoch = value.epoch
        elif isinstance(key, cr.ConsumerGroupTargetAssignmentMetadataKey) and value is not None:
            assert value.assignment_epoch <= group_epoch
        elif isinstance(key, cr.ConsumerGroupCurrentMemberAssignmentKey) and value is not None:
            assert value.member_epoch <= group_epoch
            for epochs in (*value.assigned_epochs.values(), *value.pending_revocation_epochs.values()):
                assert all(e <= max(value.member_epoch, 0) for e in epochs.values())


# -- Kafka reads what oncelog writes ------------------------------------------------------------

ROUND_TRIP_JAVA = r"""
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HexFormat;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;

/** Reads lines "keyhex valuehex" ("-" for a tombstone) from the file named by args[0]; Kafka's
 *  serde deserializes each record and serializes it again; one JSON line per record:
 *  {"key": hex, "value": hex or null, "keyJson": {...}, "valueJson": {...} or null}, or {"error": ...}. */
public class RecordRoundTrip {
    static JsonNode json(ApiMessage m, short version) throws Exception {
        Class<?> converter = Class.forName(m.getClass().getName() + "JsonConverter");
        return (JsonNode) converter.getMethod("write", m.getClass(), short.class).invoke(null, m, version);
    }

    public static void main(String[] args) throws Exception {
        HexFormat hex = HexFormat.of();
        ObjectMapper mapper = new ObjectMapper();
        GroupCoordinatorRecordSerde serde = new GroupCoordinatorRecordSerde();
        for (String line : Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8)) {
            String[] parts = line.trim().split(" ");
            ObjectNode out = mapper.createObjectNode();
            try {
                ByteBuffer key = ByteBuffer.wrap(hex.parseHex(parts[0]));
                ByteBuffer value = parts[1].equals("-") ? null : ByteBuffer.wrap(hex.parseHex(parts[1]));
                CoordinatorRecord record = serde.deserialize(key, value);
                byte[] v = serde.serializeValue(record);
                out.put("key", hex.formatHex(serde.serializeKey(record)));
                out.put("value", v == null ? null : hex.formatHex(v));
                out.set("keyJson", json(record.key(), (short) 0));
                out.set("valueJson", record.value() == null ? NullNode.getInstance()
                    : json(record.value().message(), record.value().version()));
            } catch (Exception e) {
                out = mapper.createObjectNode();
                out.put("error", e.toString());
            }
            System.out.println(mapper.writeValueAsString(out));
        }
    }
}
"""


def _uuid_json(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()  # Kafka's Uuid.toString


def _partitions_json(partitions: cr.Partitions, epochs: cr.PartitionEpochs | None = None) -> list[dict]:
    out = []
    for topic_id, parts in partitions.items():
        order = list(parts.written_order) if isinstance(parts, cr.PartitionSet) else sorted(parts)
        entry = {"topicId": _uuid_json(topic_id), "partitions": order}
        if epochs is not None and epochs.get(topic_id):
            entry["assignmentEpochs"] = [epochs[topic_id][p] for p in order]
        out.append(entry)
    return out


def _kafka_json(value) -> dict:
    """``value`` as Kafka's generated JsonConverter renders the message (tagged fields at their
    default left out, as Kafka writes them)."""
    if isinstance(value, cr.ConsumerGroupMetadataValue):
        return {"epoch": value.epoch, **({"metadataHash": value.metadata_hash} if value.metadata_hash else {})}
    if isinstance(value, cr.ConsumerGroupMemberMetadataValue):
        out = {"instanceId": value.instance_id, "rackId": value.rack_id, "clientId": value.client_id,
               "clientHost": value.client_host, "subscribedTopicNames": list(value.subscribed_topic_names),
               "subscribedTopicRegex": value.subscribed_topic_regex, "rebalanceTimeoutMs": value.rebalance_timeout_ms,
               "serverAssignor": value.server_assignor}
        classic = value.classic_member_metadata
        if classic is None:
            out["classicMemberMetadata"] = None
        elif classic != cr.ClassicMemberMetadata(0, ()):
            out["classicMemberMetadata"] = {
                "sessionTimeoutMs": classic.session_timeout_ms,
                "supportedProtocols": [{"name": name, "metadata": base64.b64encode(meta).decode()}
                                       for name, meta in classic.supported_protocols]}
        return out
    if isinstance(value, cr.ConsumerGroupTargetAssignmentMetadataValue):
        stamp = {"assignmentTimestamp": value.assignment_timestamp} if value.assignment_timestamp else {}
        return {"assignmentEpoch": value.assignment_epoch, **stamp}
    if isinstance(value, cr.ConsumerGroupTargetAssignmentMemberValue):
        return {"topicPartitions": _partitions_json(value.topic_partitions)}
    if isinstance(value, cr.ConsumerGroupCurrentMemberAssignmentValue):
        return {"memberEpoch": value.member_epoch, "previousMemberEpoch": value.previous_member_epoch,
                "state": value.state,
                "assignedPartitions": _partitions_json(value.assigned_partitions, value.assigned_epochs),
                "partitionsPendingRevocation": _partitions_json(value.partitions_pending_revocation,
                                                                value.pending_revocation_epochs)}
    if isinstance(value, cr.ConsumerGroupRegularExpressionValue):
        return {"topics": list(value.topics), "version": value.version, "timestamp": value.timestamp}
    raise TypeError(value)


def test_kafka_reads_what_oncelog_writes(tmp_path):
    source = tmp_path / "RecordRoundTrip.java"
    source.write_text(ROUND_TRIP_JAVA)
    classes = need_apache_kafka("Apache Kafka's jars and javac", lambda: apache_kafka.compile_java([str(source)]))
    records = [(key, value) for key, value in ROUND_TRIPS]
    records += [(key, value) for key, _kh, value, _vh in KAFKA_RECORDS]
    records += [(key, None) for key, _ in ROUND_TRIPS]  # tombstones
    lines = [(cr.encode_consumer_key(k).hex(), None if v is None else cr.encode_consumer_value(v).hex())
             for k, v in records]
    (tmp_path / "records.txt").write_text("".join(f"{k} {v or '-'}\n" for k, v in lines))
    done = apache_kafka.run_tool("RecordRoundTrip", [str(tmp_path / "records.txt")], classpath=[classes], timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(records), done.stdout[-3000:]
    for (key, value), (key_hex, value_hex), answer in zip(records, lines, answers):
        assert "error" not in answer, (key, value, answer)
        assert (answer["key"], answer["value"]) == (key_hex, value_hex), (key, value)
        assert answer["valueJson"] == (None if value is None else _kafka_json(value)), (key, value)
        for field, json_name in (("group", "groupId"), ("member_id", "memberId"), ("regex", "regularExpression")):
            if hasattr(key, field):
                assert answer["keyJson"][json_name] == getattr(key, field)
