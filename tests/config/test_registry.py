"""Topic and broker configs, Kafka's way: the pure registry, the storage
policies it drives, and a real broker process driven by confluent-kafka's AdminClient and
Producer (plus raw protocol requests where the AdminClient hides a field: config_type,
documentation, record_errors, the cluster-default broker resource)."""

from __future__ import annotations

import datetime
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from oncelog.config import registry
from oncelog.config.registry import ConfigError, ConfigSource, ConfigType, Handling
from oncelog.process import BrokerProcess
from oncelog.protocol import records as rb
from oncelog.config.settings import LogConfig
from oncelog.storage.partition_log import PartitionLog
from oncelog.client.wire import RawClient, request_module

from tests.helpers import consume_all, create_topic

# ------------------------------------------------------------------------------------------
# The registry (pure)

KAFKA_4_TOPIC_CONFIGS = {  # Kafka 4.4's LogConfig.configDefCopy(), read with jshell on its jars
    "errors.deadletterqueue.group.enable": ConfigType.BOOLEAN, "max.decompressed.message.bytes": ConfigType.INT,
    "remote.copy.lag.bytes": ConfigType.LONG, "remote.copy.lag.ms": ConfigType.LONG,
    "cleanup.policy": ConfigType.LIST, "compression.gzip.level": ConfigType.INT,
    "compression.lz4.level": ConfigType.INT, "compression.type": ConfigType.STRING,
    "compression.zstd.level": ConfigType.INT, "delete.retention.ms": ConfigType.LONG,
    "file.delete.delay.ms": ConfigType.LONG, "flush.messages": ConfigType.LONG, "flush.ms": ConfigType.LONG,
    "follower.replication.throttled.replicas": ConfigType.LIST, "index.interval.bytes": ConfigType.INT,
    "leader.replication.throttled.replicas": ConfigType.LIST, "local.retention.bytes": ConfigType.LONG,
    "local.retention.ms": ConfigType.LONG, "max.compaction.lag.ms": ConfigType.LONG,
    "max.message.bytes": ConfigType.INT,
    "message.timestamp.after.max.ms": ConfigType.LONG, "message.timestamp.before.max.ms": ConfigType.LONG,
    "message.timestamp.type": ConfigType.STRING, "min.cleanable.dirty.ratio": ConfigType.DOUBLE,
    "min.compaction.lag.ms": ConfigType.LONG, "min.insync.replicas": ConfigType.INT,
    "preallocate": ConfigType.BOOLEAN, "remote.log.copy.disable": ConfigType.BOOLEAN,
    "remote.log.delete.on.disable": ConfigType.BOOLEAN, "remote.storage.enable": ConfigType.BOOLEAN,
    "retention.bytes": ConfigType.LONG, "retention.ms": ConfigType.LONG, "segment.bytes": ConfigType.INT,
    "segment.index.bytes": ConfigType.INT, "segment.jitter.ms": ConfigType.LONG, "segment.ms": ConfigType.LONG,
    "unclean.leader.election.enable": ConfigType.BOOLEAN,
}


def test_registry_has_every_kafka_4_topic_config_with_its_type_and_a_decision():
    public = {n: c.type for n, c in registry.TOPIC_CONFIGS.items() if not c.internal}
    assert public == KAFKA_4_TOPIC_CONFIGS
    for c in registry.TOPIC_CONFIGS.values():
        assert c.doc and c.handling in Handling
        if c.handling == Handling.NO_EFFECT:
            assert c.doc.startswith("Accepted, no effect"), c.name  # and says why
    # LogConfig's defaults are the registry's (Kafka 4.x's)
    values = LogConfig().values()
    for name, c in registry.TOPIC_CONFIGS.items():
        default = registry.parse_value(name, c.default, c.type) if c.type == ConfigType.LIST else c.default
        assert values[name] == default, name
    assert registry.PRIMARY_SYNONYM["retention.ms"] == "log.retention.ms"
    assert [s.name for s in registry.TOPIC_CONFIGS["retention.ms"].synonyms] == [
        "log.retention.ms", "log.retention.minutes", "log.retention.hours"]
    assert registry.TOPIC_CONFIGS["message.timestamp.after.max.ms"].default == 3_600_000  # Kafka 4.x (KIP-1030)


@pytest.mark.parametrize("configs, message", [
    ({"retention.ms": "soon"}, "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
    ({"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    ({"segment.bytes": "100"}, "Invalid value 100 for configuration segment.bytes: Value must be at least 1048576"),
    ({"max.message.bytes": "3000000000"}, "Not a number of type INT"),
    ({"cleanup.policy": "compact,forever"}, "Invalid value forever for configuration cleanup.policy: "
                                            "String must be one of: compact, delete"),
    ({"compression.type": "brotli"}, "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ({"min.cleanable.dirty.ratio": "1.5"}, "Value must be no more than 1"),
    ({"compression.gzip.level": "0"}, "Value must be between 1 and 9 or equal to -1"),
    ({"unclean.leader.election.enable": "yes"}, "Expected value to be either true or false"),
    ({"leader.replication.throttled.replicas": "0-1"}, "must be the literal '*' or a list of replicas"),
    ({"message.format.version": "3.0"}, "Unknown topic config name: message.format.version"),  # removed in 4.0
    ({"no.such.thing": "1"}, "Unknown topic config name: no.such.thing"),
    ({"retention.ms": None}, "Null value not supported for topic configs: retention.ms"),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
     "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
    ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled in the broker"),
    ({"preallocate": "true"}, "Invalid value true for configuration preallocate: oncelog does not preallocate"),
])
def test_validation_answers_with_kafkas_messages(configs, message):
    with pytest.raises(ConfigError) as exc:
        registry.validate_topic_configs(configs)
    assert message in str(exc.value)


def test_values_parse_and_print_as_kafka_does():
    values = registry.validate_topic_configs({"cleanup.policy": " compact , delete ", "min.cleanable.dirty.ratio": "1e-5",
                                          "unclean.leader.election.enable": "TRUE", "retention.ms": "+42"})
    assert values["cleanup.policy"] == ["compact", "delete"] and values["retention.ms"] == 42
    assert registry.to_wire(values["cleanup.policy"], ConfigType.LIST) == "compact,delete"
    assert registry.to_wire(values["min.cleanable.dirty.ratio"], ConfigType.DOUBLE) == "1.0E-5"
    assert registry.to_wire(values["unclean.leader.election.enable"], ConfigType.BOOLEAN) == "true"
    assert [registry.java_double(x) for x in (0.5, 1.0, 12345678.0)] == ["0.5", "1.0", "1.2345678E7"]
    # lenient mode (internal topics, serve options): no 1 MiB minimum for segment.bytes
    assert registry.validate_topic_configs({"segment.bytes": "4096"}, strict=False)["segment.bytes"] == 4096


def test_broker_layers_precedence_synonyms_and_units():
    layers = registry.BrokerLayers(static={"log.retention.hours": "2"})
    assert layers.topic_defaults()["retention.ms"] == 2 * 3_600_000  # hours converted
    layers.dynamic_default["log.retention.ms"] = "5000"  # a dynamic synonym hides the static one
    assert layers.topic_defaults()["retention.ms"] == 5000
    layers.dynamic_broker["log.retention.ms"] = "7000"  # per-broker beats the cluster default
    assert layers.topic_defaults()["retention.ms"] == 7000
    assert layers.synonyms("log.retention.ms") == [
        ("log.retention.ms", "7000", ConfigSource.DYNAMIC_BROKER),
        ("log.retention.ms", "5000", ConfigSource.DYNAMIC_DEFAULT_BROKER),
        ("log.retention.hours", "2", ConfigSource.STATIC_BROKER),
        ("log.retention.hours", "168", ConfigSource.DEFAULT)]
    # Kafka's ConfigHelper drops synonyms listed before the name itself
    assert registry.BrokerLayers(static={"log.retention.hours": "2"}).synonyms("log.retention.ms") == []
    # only the first synonym of a topic config is dynamic in Kafka
    with pytest.raises(registry.RequestError, match=r"Cannot update these configs dynamically: \[log.retention.hours\]"):
        registry.validate_broker_configs({"log.retention.hours": "1"}, per_broker=False)
    with pytest.raises(registry.RequestError, match="oncelog has no broker config num.io.threads"):
        registry.validate_broker_configs({"num.io.threads": "8"}, per_broker=False)


def test_incremental_operations():
    default = lambda n: registry.TOPIC_CONFIGS[n].default  # noqa: E731
    is_list = lambda n: registry.TOPIC_CONFIGS[n].type == ConfigType.LIST  # noqa: E731
    ops = [("cleanup.policy", registry.OP_APPEND, "compact"), ("retention.ms", registry.OP_SET, "10"),
           ("segment.ms", registry.OP_DELETE, None)]
    assert registry.apply_incremental({"segment.ms": "5"}, ops, default, is_list) == {
        "cleanup.policy": "delete,compact", "retention.ms": "10"}  # APPEND starts from the default
    assert registry.apply_incremental({"cleanup.policy": "delete,compact"}, [("cleanup.policy", registry.OP_SUBTRACT, "delete")],
                                  default, is_list) == {"cleanup.policy": "compact"}
    with pytest.raises(ConfigError, match="Can't APPEND to key retention.ms because its type is not LIST."):
        registry.apply_incremental({}, [("retention.ms", registry.OP_APPEND, "1")], default, is_list)


@pytest.mark.parametrize("codec", [rb.COMPRESSION_NONE, rb.COMPRESSION_GZIP, rb.COMPRESSION_SNAPPY, rb.COMPRESSION_LZ4,
                                   rb.COMPRESSION_ZSTD])
def test_recompression_keeps_every_record(codec):
    batch = rb.build_batch([(b"k%d" % i, b"value-%d" % i * 50) for i in range(200)], timestamp_ms=1234,
                           producer_id=7, producer_epoch=1, base_sequence=3)
    out = rb.recompress_batch(rb.recompress_batch(batch, rb.COMPRESSION_GZIP), codec)
    h = rb.scan_batches(out)[0]  # valid CRC
    assert (h.compression, h.producer_id, h.base_sequence, h.record_count) == (codec, 7, 3, 200)
    assert bytes(rb.records_section(out)) == bytes(rb.records_section(batch))
    if codec == rb.COMPRESSION_LZ4:  # an LZ4 frame with independent blocks, as Kafka's Java reader requires
        assert out[rb.HEADER_SIZE + 4] == 0x60
    assert rb.xxh32(b"") == 0x02CC5D05 and rb.xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


# ------------------------------------------------------------------------------------------
# Storage policies the configs drive


def _log(tmp_path, config):
    return PartitionLog.open(str(tmp_path), "t", 0, config, sync_hw=False, recovery_point=None, clean_shutdown=False)


def _append(plog, records, ts):
    raw = bytearray(rb.build_batch(records, timestamp_ms=ts))
    return plog.append(raw, rb.scan_batches(bytes(raw)), ts)[0]


def _flush(plog):
    segments, offset = plog.take_flush_work()
    for seg in segments:
        seg.flush()
    plog.flushed(offset)


def _survivors(plog):
    return [(o, k, v) for seg in plog.segments for pos, h in seg.iter_headers(0)
            for o, _, k, v in rb.iter_records(seg.read(pos, h.size))]


def test_segment_index_bytes_jitter_and_max_compaction_lag_roll_segments(tmp_path):
    plog = _log(tmp_path / "idx", LogConfig(segment_index_bytes=24, index_interval_bytes=0))
    for i in range(10):
        _append(plog, [(b"k", b"v")], 1000 + i)
    assert len(plog.segments) == 5  # 24 bytes: 2 time-index entries (12 bytes) per segment
    jittered = _log(tmp_path / "jit", LogConfig(segment_ms=1000, segment_jitter_ms=900))
    assert 0 <= jittered.active.roll_jitter_ms < 900
    compacted = _log(tmp_path / "lag", LogConfig(cleanup_policy="compact", max_compaction_lag_ms=50))
    _append(compacted, [(b"k", b"v")], 1000)
    _append(compacted, [(b"k", b"v")], 1060)  # older than max.compaction.lag.ms: rolls (segment.ms is 7 days)
    assert len(compacted.segments) == 2


def test_retention_applies_only_with_the_delete_policy(tmp_path):
    for policy, kept in (("delete", 1), ("compact", 3), ("compact,delete", 1)):
        plog = _log(tmp_path / policy, LogConfig(segment_bytes=200, retention_ms=10, cleanup_policy=policy))
        for i in range(3):
            _append(plog, [(b"k%d" % i, b"x" * 150)], 1000)
        _flush(plog)
        plog.apply_retention(now_ms=10_000)
        assert len(plog.segments) == kept, policy


def test_cleaner_honours_lag_dirty_ratio_and_tombstone_retention(tmp_path):
    from oncelog.storage.cleaner import compact, needs_compaction

    now = 1_000_000
    # segment.bytes=100: one batch per segment
    cfg = LogConfig(segment_bytes=100, cleanup_policy="compact", min_compaction_lag_ms=10_000,
                    delete_retention_ms=5_000, min_cleanable_dirty_ratio=0.5)
    plog = _log(tmp_path / "t1", cfg)
    for i in range(6):  # old data: two versions of a, b; a tombstone for c
        _append(plog, [(b"a", b"a%d" % i), (b"b", b"b%d" % i)], now - 100_000)
    _append(plog, [(b"c", None)], now - 100_000)
    for i in range(4):  # young data (inside min.compaction.lag.ms): must stay as is
        _append(plog, [(b"a", b"young%d" % i)], now - 1_000)
    _flush(plog)
    assert needs_compaction(plog, now)
    compact(plog, now)
    got = _survivors(plog)
    keys = [k for _, k, _ in got]
    assert keys.count(b"a") == 1 + 4 and keys.count(b"b") == 1  # old a/b compacted; young ones untouched
    assert b"c" not in keys  # a tombstone older than delete.retention.ms goes
    assert not needs_compaction(plog, now)  # nothing dirty since the last pass
    # min.cleanable.dirty.ratio and max.compaction.lag.ms decide when to run again
    ratio = _log(tmp_path / "ratio", LogConfig(segment_bytes=100, cleanup_policy="compact"))
    for i in range(10):
        _append(ratio, [(b"k%d" % i, b"v")], now - 60_000)
    _flush(ratio)
    compact(ratio, now)
    for i in range(2):  # one new closed segment: ~10% dirty
        _append(ratio, [(b"n%d" % i, b"v")], now - 60_000)
    _flush(ratio)
    assert not needs_compaction(ratio, now)
    ratio.update_config(LogConfig(segment_bytes=100, cleanup_policy="compact", min_cleanable_dirty_ratio=0.05))
    assert needs_compaction(ratio, now)
    ratio.update_config(LogConfig(segment_bytes=100, cleanup_policy="compact", max_compaction_lag_ms=30_000))
    assert needs_compaction(ratio, now)  # dirty for 60 s, longer than max.compaction.lag.ms
    # delete.retention.ms counts from the tombstone's timestamp: kept while younger
    fresh = _log(tmp_path / "t2", LogConfig(segment_bytes=100, cleanup_policy="compact", delete_retention_ms=5_000))
    _append(fresh, [(b"x", b"1")], now - 60_000)
    _append(fresh, [(b"x", None)], now - 60_000)
    _append(fresh, [(b"y", None)], now - 1_000)
    _append(fresh, [(b"z", b"active")], now)
    _flush(fresh)
    compact(fresh, now)
    assert [(k, v) for _, k, v in _survivors(fresh)] == [(b"y", None), (b"z", b"active")]


def test_a_once_compacted_log_keeps_its_gaps_after_its_policy_changes(tmp_path):
    """cleanup.policy can change at run time; recovery must still accept the offset gaps the
    cleaner left (it would otherwise truncate the log at the first one)."""
    from oncelog.storage.cleaner import compact

    plog = _log(tmp_path, LogConfig(segment_bytes=100, cleanup_policy="compact"))
    for i in range(10):
        _append(plog, [(b"k%d" % (i % 2), b"v%d" % i)], 1000)
    _flush(plog)
    compact(plog, 2000)
    end = plog.log_end_offset
    plog.close()
    again = PartitionLog.open(str(tmp_path), "t", 0, LogConfig(segment_bytes=100), sync_hw=False,
                              recovery_point=None, clean_shutdown=False)  # unclean, policy now delete
    assert again.log_end_offset == end == 10
    assert [o for o, _, _ in _survivors(again)] == [8, 9]


def test_flush_messages_and_flush_ms_trigger_fsync_rounds_under_fsync_never(tmp_path):
    import asyncio

    from tests.broker_parts import open_parts

    async def run():
        parts = open_parts(str(tmp_path))
        logs = parts.logs
        parts.metadata.topics.create_topic("by-count", 1, configs={"flush.messages": "3"})
        parts.metadata.topics.create_topic("by-age", 1, configs={"flush.ms": "50"})
        logs.start_background()
        try:
            count, age = logs.get_log("by-count", 0), logs.get_log("by-age", 0)
            for i in range(2):
                now = int(time.time() * 1000)
                _append(count, [(b"k", b"v")], now)
                logs.after_append(count, now)
            await asyncio.sleep(0.2)
            assert count.flushed_offset == 0  # 2 records: below flush.messages
            _append(count, [(b"k", b"v")], int(time.time() * 1000))
            logs.after_append(count, int(time.time() * 1000))
            _append(age, [(b"k", b"v")], int(time.time() * 1000))
            deadline = time.monotonic() + 5
            while (count.flushed_offset, age.flushed_offset) != (3, 1) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert (count.flushed_offset, age.flushed_offset) == (3, 1)
        finally:
            await logs.close()

    asyncio.run(run())


def test_cleaner_keeps_headers_and_compresses_with_the_batch_codec(tmp_path):
    from oncelog.storage.cleaner import compact

    plog = _log(tmp_path, LogConfig(segment_bytes=200, cleanup_policy="compact"))
    rec = rb.encode_record(0, 0, b"k", b"old", [("h", b"1")]) + rb.encode_record(1, 0, b"j", b"keep", [("h", b"2")])
    body = rb.compress_records(rb.COMPRESSION_ZSTD, rec)
    import struct

    import crc32c
    tail = struct.pack(">hiqqqhii", rb.COMPRESSION_ZSTD, 1, 5000, 5000, -1, -1, -1, 2) + body
    raw = bytearray(struct.pack(">qiibI", 0, len(tail) + 9, 0, 2, crc32c.crc32c(tail)) + tail)
    plog.append(raw, rb.scan_batches(bytes(raw)), 5000)
    _append(plog, [(b"k", b"new" * 60)], 5000)
    _append(plog, [(b"z", b"z")], 5000)
    _flush(plog)
    compact(plog, 6000)
    first = plog.segments[0]
    pos, h = next(first.iter_headers(0))
    assert h.compression == rb.COMPRESSION_ZSTD
    records = list(rb.iter_records_raw(first.read(pos, h.size)))
    assert [(r[0], r[2], r[3]) for r in records] == [(1, b"j", b"keep")]
    assert records[0][5].endswith(b"\x02\x02h\x022")  # 1 header: "h" = "2", copied as written


# ------------------------------------------------------------------------------------------
# A real broker, real clients


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("configs") / "broker"),
                      extra_args=["--retention-ms", "86400000", "--retention-check-ms", "200"]).start()
    yield b
    b.kill()


def admin_for(b):
    return AdminClient({"bootstrap.servers": b.bootstrap})


def describe(admin, rtype, name):
    res = ConfigResource(rtype, name)
    return admin.describe_configs([res])[res].result(10)


def raw_describe(b, rtype, name, keys=None):
    m = request_module(32, 4)
    c = RawClient(b.bootstrap)
    try:
        r = c.request(m.DescribeConfigsRequest(resources=(m.DescribeConfigsResource(
            resource_type=rtype, resource_name=name, configuration_keys=keys),), include_synonyms=True,
            include_documentation=True))
    finally:
        c.close()
    return r.results[0]


def raw_incremental(b, rtype, name, ops, validate_only=False):
    m = request_module(44, 1)
    c = RawClient(b.bootstrap)
    try:
        r = c.request(m.IncrementalAlterConfigsRequest(resources=(m.AlterConfigsResource(
            resource_type=rtype, resource_name=name, configs=tuple(
                m.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops)),),
            validate_only=validate_only))
    finally:
        c.close()
    return r.responses[0]


def raw_produce(b, topic, batch, acks=-1, version=9):
    """Produce one partition's records; the partition's response (None for acks=0)."""
    m = request_module(0, version)
    c = RawClient(b.bootstrap)
    request = m.ProduceRequest(transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=10),
                               topic_data=(m.TopicProduceData(name=topic, partition_data=(
                                   m.PartitionProduceData(index=0, records=batch),)),))
    try:
        if acks == 0:
            c.send_frame(c.encode(request))
            return None
        return c.request(request).responses[0].partition_responses[0]
    finally:
        c.close()


def raw_fetch_first_batch(b, topic):
    m = request_module(1, 12)
    c = RawClient(b.bootstrap)
    try:
        r = c.request(m.FetchRequest(replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                                     isolation_level=0, session_id=0, session_epoch=-1,
                                     topics=(m.FetchTopic(topic=topic, partitions=(m.FetchPartition(
                                         partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                                         log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                                     forgotten_topics_data=(), rack_id=""))
    finally:
        c.close()
    part = r.responses[0].partitions[0]
    return part.high_watermark, (rb.parse_header(part.records) if part.records else None)


def failure(future) -> ck.KafkaError:
    with pytest.raises(ck.KafkaException) as exc:
        future.result(10)
    return exc.value.args[0]


def test_create_topics_accepts_every_kafka_config_and_refuses_like_kafka(server):
    admin = admin_for(server)
    every = {"cleanup.policy": "compact,delete", "compression.type": "zstd", "compression.gzip.level": "5",
             "compression.lz4.level": "3", "compression.zstd.level": "7", "delete.retention.ms": "1000",
             "file.delete.delay.ms": "10", "flush.messages": "1000", "flush.ms": "500",
             "follower.replication.throttled.replicas": "0:1", "index.interval.bytes": "1024",
             "leader.replication.throttled.replicas": "*", "local.retention.bytes": "-2", "local.retention.ms": "-2",
             "max.compaction.lag.ms": "100000", "max.message.bytes": "500000", "max.decompressed.message.bytes": "1048576",
             "errors.deadletterqueue.group.enable": "false", "remote.copy.lag.bytes": "-1", "remote.copy.lag.ms": "0",
             "message.timestamp.after.max.ms": "1000", "message.timestamp.before.max.ms": "100000",
             "message.timestamp.type": "LogAppendTime", "min.cleanable.dirty.ratio": "0.25",
             "min.compaction.lag.ms": "10", "min.insync.replicas": "1", "preallocate": "false",
             "remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false",
             "remote.storage.enable": "false", "retention.bytes": "1000000", "retention.ms": "3600000",
             "segment.bytes": "2097152", "segment.index.bytes": "4096", "segment.jitter.ms": "10",
             "segment.ms": "60000", "unclean.leader.election.enable": "true"}
    assert set(every) == set(KAFKA_4_TOPIC_CONFIGS)
    # validate_only checks and creates nothing
    admin.create_topics([NewTopic("every", 1, 1, config=every)], validate_only=True)["every"].result(10)
    assert "every" not in admin.list_topics(timeout=10).topics
    admin.create_topics([NewTopic("every", 1, 1, config=every)])["every"].result(10)
    got = describe(admin, "topic", "every")
    for name, value in every.items():
        assert (got[name].value, got[name].source) == (value, ConfigSource.TOPIC), name
    bad = {"bad-unknown": ({"retention.msec": "1"}, "Unknown topic config name: retention.msec"),
           "bad-range": ({"segment.bytes": "1000"}, "Value must be at least 1048576"),
           "bad-tiered": ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled"),
           "bad-prealloc": ({"preallocate": "true"}, "oncelog does not preallocate segment files")}
    futures = admin.create_topics([NewTopic(n, 1, 1, config=c) for n, (c, _) in bad.items()])
    for name, (_, message) in bad.items():
        err = failure(futures[name])
        assert err.code() == ck.KafkaError.INVALID_CONFIG and message in err.str(), (name, err)
    assert not set(bad) & set(admin.list_topics(timeout=10).topics)


def test_create_topics_v7_answers_every_config_with_its_source(server):
    m = request_module(19, 7)
    c = RawClient(server.bootstrap)
    try:
        r = c.request(m.CreateTopicsRequest(topics=(m.CreatableTopic(
            name="created-v7", num_partitions=1, replication_factor=1, assignments=(),
            configs=(m.CreatableTopicConfig(name="cleanup.policy", value="compact"),)),),
            timeout=datetime.timedelta(seconds=5), validate_only=True))
    finally:
        c.close()
    result = r.topics[0]
    assert result.error_code == 0 and (result.num_partitions, result.replication_factor) == (1, 1)
    got = {e.name: (e.value, e.config_source, e.read_only) for e in result.configs}
    assert set(got) == set(KAFKA_4_TOPIC_CONFIGS)
    assert got["cleanup.policy"] == ("compact", 1, False)
    assert got["retention.ms"] == ("86400000", 4, False)  # serve --retention-ms
    assert got["segment.bytes"] == ("1073741824", 5, False)


def test_describe_configs_types_sources_synonyms_and_documentation(server):
    create_topic(server.bootstrap, "described", 1, {"cleanup.policy": "compact", "min.insync.replicas": "2"})
    result = raw_describe(server, 2, "described")
    assert result.error_code == 0
    entries = {e.name: e for e in result.configs}
    assert set(entries) == set(KAFKA_4_TOPIC_CONFIGS)
    for name, e in entries.items():
        assert e.config_type == KAFKA_4_TOPIC_CONFIGS[name], name
        assert e.documentation and not e.read_only and not e.is_sensitive
    policy = entries["cleanup.policy"]
    assert (policy.value, policy.config_source) == ("compact", 1)
    assert [(s.name, s.value, s.source) for s in policy.synonyms] == [
        ("cleanup.policy", "compact", 1), ("log.cleanup.policy", "delete", 5)]
    retention = entries["retention.ms"]  # serve --retention-ms: a static broker config
    assert (retention.value, retention.config_source) == ("86400000", 4)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("log.retention.ms", "86400000", 4), ("log.retention.hours", "168", 5)]
    ratio = entries["min.cleanable.dirty.ratio"]
    assert (ratio.value, ratio.config_source, ratio.config_type) == ("0.5", 5, ConfigType.DOUBLE)
    assert "Accepted, no effect" in entries["unclean.leader.election.enable"].documentation
    # the AdminClient sees the same
    got = describe(admin_for(server), "topic", "described")
    assert got["min.insync.replicas"].source == ConfigSource.TOPIC and not got["min.insync.replicas"].is_default
    assert got["segment.ms"].source == ConfigSource.DEFAULT and got["segment.ms"].is_default

    broker = {e.name: e for e in raw_describe(server, 4, "1").configs}
    assert broker["listeners"].value == f"PLAINTEXT://{server.bootstrap}"
    assert broker["advertised.listeners"].value == f"PLAINTEXT://{server.bootstrap}"
    assert (broker["node.id"].value, broker["node.id"].config_type, broker["node.id"].read_only) == ("1", 3, True)
    assert (broker["log.retention.ms"].config_source, broker["log.retention.ms"].read_only) == (4, False)
    assert (broker["log.retention.hours"].value, broker["log.retention.hours"].config_source) == ("168", 5)
    assert (broker["log.cleanup.policy"].config_type, broker["log.cleanup.policy"].read_only) == (7, False)
    assert broker["oncelog.fsync"].config_source == 4  # BrokerProcess passes --fsync
    assert broker["num.partitions"].read_only and broker["num.partitions"].config_source == 5
    assert raw_describe(server, 4, "7").error_code == 42  # INVALID_REQUEST: another broker
    assert raw_describe(server, 2, "no-such-topic").error_code == 3
    keys = raw_describe(server, 2, "described", keys=("retention.ms", "segment.ms")).configs
    assert [e.name for e in keys] == ["retention.ms", "segment.ms"]


@pytest.mark.e2e  # starts its own broker processes
def test_topic_alter_configs_apply_at_once_and_survive_a_restart(tmp_path):
    b = BrokerProcess(str(tmp_path / "b")).start()
    try:
        admin = admin_for(b)
        create_topic(b.bootstrap, "live", 1)
        big = rb.build_batch([(b"k", b"x" * 2000)], timestamp_ms=int(time.time() * 1000))
        assert raw_produce(b, "live", big).error_code == 0
        res = ConfigResource("topic", "live", incremental_configs=[
            ConfigEntry("max.message.bytes", "1000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
        # validate_only changes nothing
        admin.incremental_alter_configs([res], validate_only=True)[res].result(10)
        assert describe(admin, "topic", "live")["max.message.bytes"].value == "1048588"
        admin.incremental_alter_configs([res])[res].result(10)
        assert raw_produce(b, "live", big).error_code == 10  # MESSAGE_TOO_LARGE at once
        keyless = rb.build_batch([(None, b"v")], timestamp_ms=int(time.time() * 1000))
        assert raw_produce(b, "live", keyless).error_code == 87  # compacted now: keys required
        got = describe(admin, "topic", "live")
        assert got["cleanup.policy"].value == "delete,compact"  # APPEND starts from the default
        # errors, as Kafka answers them
        for ops, code, text in [
            ([ConfigEntry("retention.ms", "x", incremental_operation=AlterConfigOpType.APPEND)],
             ck.KafkaError.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST."),
            ([ConfigEntry("retention.ms", "-5", incremental_operation=AlterConfigOpType.SET)],
             ck.KafkaError.INVALID_CONFIG, "Value must be at least -1"),
            ([ConfigEntry("no.such", "1", incremental_operation=AlterConfigOpType.SET)],
             ck.KafkaError.INVALID_CONFIG, "Unknown topic config name: no.such")]:
            r = ConfigResource("topic", "live", incremental_configs=ops)
            err = failure(admin.incremental_alter_configs([r])[r])
            assert err.code() == code and text in err.str(), err
        r = ConfigResource("topic", "nope", incremental_configs=[
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
        assert failure(admin.incremental_alter_configs([r])[r]).code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART
        b.stop()
        b.start()
        admin = admin_for(b)
        got = describe(admin, "topic", "live")
        assert {n: got[n].value for n in ("max.message.bytes", "retention.ms", "cleanup.policy")} == {
            "max.message.bytes": "1000", "retention.ms": "3600000", "cleanup.policy": "delete,compact"}
        assert raw_produce(b, "live", big).error_code == 10  # still applied after the restart
        # SUBTRACT and DELETE
        r = ConfigResource("topic", "live", incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SUBTRACT),
            ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE)])
        admin.incremental_alter_configs([r])[r].result(10)
        assert raw_produce(b, "live", big).error_code == 0 and raw_produce(b, "live", keyless).error_code == 0
        # legacy AlterConfigs replaces the whole set
        r = ConfigResource("topic", "live", set_config={"segment.ms": "60000"})
        with pytest.warns(DeprecationWarning):  # confluent-kafka deprecates it; Kafka still serves it
            admin.alter_configs([r])[r].result(10)
        got = describe(admin, "topic", "live")
        assert [n for n, e in got.items() if e.source == ConfigSource.TOPIC] == ["segment.ms"]
    finally:
        b.kill()


@pytest.mark.e2e  # starts its own broker processes
def test_broker_dynamic_configs_are_kafkas_and_persist(tmp_path):
    b = BrokerProcess(str(tmp_path / "b")).start()
    try:
        admin = admin_for(b)
        create_topic(b.bootstrap, "plain", 1)
        create_topic(b.bootstrap, "own", 1, {"retention.ms": "1000"})
        # the cluster default (resource name "": confluent-kafka cannot name it, so raw)
        assert raw_incremental(b, 4, "", [("log.retention.ms", 0, "5000")]).error_code == 0
        e = describe(admin, "topic", "plain")["retention.ms"]
        assert (e.value, e.source) == ("5000", ConfigSource.DYNAMIC_DEFAULT_BROKER)
        assert describe(admin, "topic", "own")["retention.ms"].value == "1000"  # the override wins
        assert [(e.name, e.value, e.config_source) for e in raw_describe(b, 4, "").configs] == [
            ("log.retention.ms", "5000", 3), ("min.insync.replicas", "1", 3)]  # the second: Kafka's ELR (below)
        # this broker's own dynamic config beats the cluster default
        r = ConfigResource("broker", "1", incremental_configs=[
            ConfigEntry("log.retention.ms", "7000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
        admin.incremental_alter_configs([r])[r].result(10)
        got = describe(admin, "topic", "plain")
        assert (got["retention.ms"].value, got["retention.ms"].source) == ("7000", ConfigSource.DYNAMIC_BROKER)
        assert got["cleanup.policy"].value == "delete,compact"
        keyless = rb.build_batch([(None, b"v")], timestamp_ms=int(time.time() * 1000))
        assert raw_produce(b, "plain", keyless).error_code == 87  # applied to live topics at once
        # what Kafka does not allow dynamically, and what oncelog does not have
        for name, value, text in [("num.partitions", "3", "Cannot update these configs dynamically: [num.partitions]"),
                                  ("log.retention.hours", "1", "Cannot update these configs dynamically"),
                                  ("advertised.listeners", "PLAINTEXT://x:1", "Cannot update these configs dynamically"),
                                  ("num.io.threads", "8", "oncelog has no broker config num.io.threads"),
                                  ("log.segment.bytes", "10", "Value must be at least 1048576")]:
            r = ConfigResource("broker", "1", incremental_configs=[
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
            err = failure(admin.incremental_alter_configs([r])[r])
            assert err.code() == ck.KafkaError.INVALID_REQUEST and text in err.str(), err
        wrong = raw_incremental(b, 4, "9", [("log.retention.ms", 0, "1")])
        assert (wrong.error_code, wrong.error_message) == (42, "Unexpected broker id, expected 1, but received 9")
        b.stop()
        b.start()
        admin = admin_for(b)
        got = describe(admin, "topic", "plain")
        assert (got["retention.ms"].value, got["cleanup.policy"].value) == ("7000", "delete,compact")
        # (confluent-kafka keys synonyms by name, so two log.retention.ms collapse: read them raw)
        entry = next(e for e in raw_describe(b, 2, "plain", keys=("retention.ms",)).configs)
        assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
            ("log.retention.ms", "7000", 2), ("log.retention.ms", "5000", 3), ("log.retention.hours", "168", 5)]
        # legacy AlterConfigs on the broker replaces its set: back to the cluster default
        r = ConfigResource("broker", "1", set_config={})
        with pytest.warns(DeprecationWarning):
            admin.alter_configs([r])[r].result(10)
        assert describe(admin, "topic", "plain")["retention.ms"].value == "5000"
    finally:
        b.kill()


def test_min_insync_replicas_is_capped_at_the_replication_factor(server):
    # Kafka's Partition.effectiveMinIsr: min(min.insync.replicas, replication factor), so a
    # one-replica topic takes acks=all whatever min.insync.replicas says (Kafka 4.4 answers so)
    create_topic(server.bootstrap, "minisr", 1, {"min.insync.replicas": "2"})
    now = int(time.time() * 1000)
    assert raw_produce(server, "minisr", rb.build_batch([(b"k", b"all")], timestamp_ms=now), acks=-1).error_code == 0
    assert raw_produce(server, "minisr", rb.build_batch([(b"k", b"one")], timestamp_ms=now), acks=1).error_code == 0
    assert raw_produce(server, "minisr", rb.build_batch([(b"k", b"zero")], timestamp_ms=now), acks=0) is None
    p = ck.Producer({"bootstrap.servers": server.bootstrap, "acks": "all", "retries": 0,
                     "enable.idempotence": False})
    errors = []
    p.produce("minisr", key=b"k", value=b"v", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors == [None]
    got = consume_all(server.bootstrap, "minisr", 1, expected=4, timeout=20)
    assert [v for _, _, v, _ in got[0]] == [b"all", b"one", b"zero", b"v"]


def test_compacted_topic_refuses_records_without_key_with_record_errors(server):
    create_topic(server.bootstrap, "keyed", 1, {"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    batch = rb.build_batch([(b"a", b"1"), (None, b"2"), (b"c", b"3"), (None, b"4")], timestamp_ms=now)
    r = raw_produce(server, "keyed", batch)
    assert r.error_code == 87  # INVALID_RECORD
    message = "Compacted topic cannot accept message without key in topic partition keyed-0"
    assert [(e.batch_index, e.batch_index_error_message) for e in r.record_errors] == [(1, message), (3, message)]
    assert r.error_message.startswith("One or more records have been rejected due to 2 record errors in total")
    compressed = rb.recompress_batch(batch, rb.COMPRESSION_LZ4)  # compressed batches are read too
    assert raw_produce(server, "keyed", compressed).error_code == 87
    assert raw_fetch_first_batch(server, "keyed") == (0, None)  # nothing of those batches stored
    assert raw_produce(server, "keyed", rb.build_batch([(b"a", b"1")], timestamp_ms=now)).error_code == 0
    p = ck.Producer({"bootstrap.servers": server.bootstrap})
    errors = []
    p.produce("keyed", value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors[0].code() == ck.KafkaError.INVALID_RECORD


def test_timestamp_bounds(server):
    create_topic(server.bootstrap, "ts-bounds", 1, {"message.timestamp.before.max.ms": "60000"})
    create_topic(server.bootstrap, "ts-append", 1, {"message.timestamp.type": "LogAppendTime"})
    now = int(time.time() * 1000)
    old = raw_produce(server, "ts-bounds", rb.build_batch([(b"k", b"v")], timestamp_ms=now - 3_600_000))
    assert old.error_code == 32 and old.record_errors[0].batch_index == 0  # INVALID_TIMESTAMP
    assert "is out of range" in old.record_errors[0].batch_index_error_message
    assert old.error_message == "One or more records have been rejected due to invalid timestamp"
    # Kafka 4.x's default message.timestamp.after.max.ms: one hour
    future = raw_produce(server, "ts-bounds", rb.build_batch([(b"k", b"v")], timestamp_ms=now + 2 * 3_600_000))
    assert future.error_code == 32
    assert raw_produce(server, "ts-bounds", rb.build_batch([(b"k", b"v")], timestamp_ms=now)).error_code == 0
    # LogAppendTime: the broker's clock is used, any producer timestamp is fine
    assert raw_produce(server, "ts-append", rb.build_batch([(b"k", b"v")], timestamp_ms=1)).error_code == 0


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd", "uncompressed"])
def test_compression_type_recompresses_batches(server, codec):
    topic = f"codec-{codec}"
    create_topic(server.bootstrap, topic, 1, {"compression.type": codec})
    producer_codec = "none" if codec != "uncompressed" else "gzip"
    p = ck.Producer({"bootstrap.servers": server.bootstrap, "compression.type": producer_codec, "linger.ms": 50})
    values = [b"value-%d-" % i + b"x" * 100 for i in range(50)]
    for i, v in enumerate(values):
        p.produce(topic, key=b"k%d" % i, value=v)
    assert p.flush(10) == 0
    _, header = raw_fetch_first_batch(server, topic)
    assert header.compression == rb.CODEC_NAMES[codec]
    got = consume_all(server.bootstrap, topic, 1, expected=len(values), timeout=20)
    assert [v for _, _, v, _ in got[0]] == values  # librdkafka reads what the broker wrote


@pytest.mark.e2e  # starts its own broker processes
def test_retention_change_applies_to_the_live_partition(tmp_path):
    b = BrokerProcess(str(tmp_path / "b"), extra_args=["--segment-bytes", "2000", "--retention-check-ms", "100"]).start()
    try:
        create_topic(b.bootstrap, "shrink", 1)
        p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        for i in range(30):
            p.produce("shrink", key=b"k", value=b"x" * 300)
            p.flush(10)
        admin = admin_for(b)
        c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "w"})
        assert c.get_watermark_offsets(ck.TopicPartition("shrink", 0), timeout=10)[0] == 0
        r = ConfigResource("topic", "shrink", incremental_configs=[
            ConfigEntry("retention.bytes", "2500", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([r])[r].result(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            low, high = c.get_watermark_offsets(ck.TopicPartition("shrink", 0), timeout=10)
            if low > 0:
                break
            time.sleep(0.1)
        c.close()
        assert low > 0 and high == 30
    finally:
        b.kill()


def test_a_topic_stored_with_a_config_kafka_4_4_removed_opens_without_it(tmp_path, caplog):
    """message.downconversion.enable is unknown in Kafka 4.4 (and now in oncelog): a topic an older
    oncelog stored with it opens, keeps its other overrides, and the dropped one is logged."""
    import asyncio
    import json
    import logging

    from tests.broker_parts import open_parts

    async def make():
        parts = open_parts(str(tmp_path))
        parts.metadata.topics.create_topic("old", 1, configs={"retention.ms": "12345"})
        await parts.close()

    async def reopen():
        with caplog.at_level(logging.ERROR):
            parts = open_parts(str(tmp_path))
        try:
            return parts.metadata.topics.get("old").config
        finally:
            await parts.close()

    asyncio.run(make())
    path = tmp_path / "topics.json"
    doc = json.loads(path.read_text())
    doc["old"]["configs"]["message.downconversion.enable"] = "false"  # as an older oncelog stored it
    path.write_text(json.dumps(doc))
    config = asyncio.run(reopen())
    assert config.retention_ms == 12345
    assert not hasattr(config, "message_downconversion_enable")
    assert "Unknown topic config name: message.downconversion.enable" in caplog.text


@pytest.mark.e2e  # starts its own broker processes
def test_cluster_level_min_insync_replicas_as_kafka_with_elr(tmp_path):
    # The same check as Apache Kafka 4.4 passes (tests/kafka/test_elr_min_isr_kafka.py), then
    # oncelog's own part of the rule: the value is written once, from the static one at the first
    # start, and a later static value does not replace it (Kafka's controller writes it once).
    from tests import elr_min_isr_cases

    b = BrokerProcess(str(tmp_path / "b")).start()
    try:
        create_topic(b.bootstrap, "plain", 1)
        elr_min_isr_cases.check(b.bootstrap, 1, "plain")
        b.stop()
        b.extra_args = [*b.extra_args, "--override", "min.insync.replicas=2"]
        b.start()
        assert [(e.name, e.value, e.config_source) for e in raw_describe(b, 2, "plain", keys=("min.insync.replicas",))
                .configs] == [("min.insync.replicas", "1", 3)]
    finally:
        b.kill()

    fresh = BrokerProcess(str(tmp_path / "c"), extra_args=["--override", "min.insync.replicas=2"]).start()
    try:
        assert [(e.name, e.value, e.config_source) for e in raw_describe(fresh, 4, "").configs] == [
            ("min.insync.replicas", "2", 3)]
    finally:
        fresh.kill()
