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
import uuid

import pytest

from oncelog.tools import apache_kafka
from oncelog.groups import consumer_records as cr
from oncelog.groups.records import encode_key

from ..groups.test_consumer_records import KAFKA_RECORDS, ROUND_TRIPS, check_live_run, live_run
from ..helpers import need_apache_kafka

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]


def test_kafka_written_consumer_group_records_decode_and_reencode_byte_for_byte(apache_kafka):
    run = live_run(apache_kafka.bootstrap, classic_member=True)  # decodes and re-encodes every record
    check_live_run(run)  # B's resolved regular expression (type 16) included, as oncelog writes it
    # the classic-protocol member's JoinGroup protocols, kept in its member record
    classic = run.metadata["c"].classic_member_metadata
    assert classic is not None and classic.session_timeout_ms == 10000
    assert classic.supported_protocols and all(run.topic.encode() in meta for _, meta in classic.supported_protocols)
    assert run.metadata["c"].subscribed_topic_names == (run.topic,)
    # Kafka 4.4's per-partition assignment epochs: on every topic of every current assignment
    for key, value in run.decoded:
        if isinstance(key, cr.ConsumerGroupCurrentMemberAssignmentKey) and value is not None:
            assert set(value.assigned_epochs) == set(value.assigned_partitions)
            assert set(value.pending_revocation_epochs) == set(value.partitions_pending_revocation)


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
    lines = [(encode_key(k).hex(), None if v is None else cr.encode_consumer_value(v).hex())
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
