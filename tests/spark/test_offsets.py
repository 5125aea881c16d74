"""The source's offset arithmetic and option validation, sans-IO (no processes).

``rate_limit`` is checked on worked examples computed by hand from Spark's
``KafkaMicroBatchStream.rateLimit``::

    sizes   = {tp: until(tp) - from(tp)   for partitions with size > 0}
    total   = sum(sizes)
    if total < 1: return until
    prorate = limit * size / total
    step    = ceil(prorate) if prorate < 1 else floor(prorate)   # don't starve small partitions
    end(tp) = min(until(tp), from(tp) + step)                    # partitions without lag: until(tp)
"""

from __future__ import annotations

import json
import random

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict

from oncelog.spark import offsets as off
from oncelog.spark.faults import barrier_off
from oncelog.spark.options import COMPRESSION_CODECS, OptionError, sink_options, source_options

# ---------------------------------------------------------------------------------------------
# rate_limit


def test_rate_limit_splits_by_lag():
    # lags 100 and 300, limit 40: 40*100/400 = 10, 40*300/400 = 30
    start = {("a", 0): 0, ("a", 1): 0}
    available = {("a", 0): 100, ("a", 1): 300}
    assert off.rate_limit(start, available, 40) == {("a", 0): 10, ("a", 1): 30}


def test_rate_limit_rounds_a_share_above_one_down_and_below_one_up():
    # lags 1000, 1 and 0, limit 10: p0 10*1000/1001 = 9.99 -> 9; p1 10/1001 = 0.00999 -> 1
    # (never starved); p2 has no lag and keeps its end
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}
    available = {("t", 0): 1000, ("t", 1): 1, ("t", 2): 0}
    assert off.rate_limit(start, available, 10) == {("t", 0): 9, ("t", 1): 1, ("t", 2): 0}


def test_rate_limit_shares_below_one_may_exceed_the_limit_as_in_spark():
    # four partitions of lag 100, limit 2: 0.5 each, rounded up to 1: 4 offsets in total
    start = {("t", p): 50 for p in range(4)}
    available = {("t", p): 150 for p in range(4)}
    assert off.rate_limit(start, available, 2) == {("t", p): 51 for p in range(4)}


def test_rate_limit_floor_may_read_less_than_the_limit():
    # three partitions of lag 10, limit 5: 5/3 = 1.67 -> 1 each
    start = {("t", p): 0 for p in range(3)}
    available = {("t", p): 10 for p in range(3)}
    assert off.rate_limit(start, available, 5) == {("t", p): 1 for p in range(3)}


def test_rate_limit_is_capped_at_what_is_available():
    # lag 15, limit 100: 5 + 100 = 105, capped at 20
    assert off.rate_limit({("t", 0): 5}, {("t", 0): 20}, 100) == {("t", 0): 20}
    # lags 2 and 98, limit 1000: both read to the end
    start = {("t", 0): 0, ("t", 1): 2}
    available = {("t", 0): 2, ("t", 1): 100}
    assert off.rate_limit(start, available, 1000) == available


def test_rate_limit_new_partitions_start_from_new_start():
    # p0 lag 10 (from 10), p1 new from 0, lag 30; limit 8: 8*10/40 = 2, 8*30/40 = 6
    start = {("t", 0): 10}
    available = {("t", 0): 20, ("t", 1): 30}
    assert off.rate_limit(start, available, 8, {("t", 1): 0}) == {("t", 0): 12, ("t", 1): 6}
    # without new_start the new partition's start is 0 too
    assert off.rate_limit(start, available, 8) == {("t", 0): 12, ("t", 1): 6}


def test_rate_limit_without_limit_or_lag_returns_available():
    start = {("t", 0): 7, ("t", 1): 3}
    available = {("t", 0): 7, ("t", 1): 3}
    assert off.rate_limit(start, available, 5) == available
    assert off.rate_limit(start, {("t", 0): 70, ("t", 1): 30}, None) == {("t", 0): 70, ("t", 1): 30}


def test_rate_limit_never_moves_backwards_or_past_available():
    rng = random.Random(3)
    for _ in range(500):
        tps = [("t", p) for p in range(rng.randint(1, 6))]
        start = {tp: rng.randint(0, 1000) for tp in tps}
        available = {tp: start[tp] + rng.choice([0, 0, 1, rng.randint(0, 10_000)]) for tp in tps}
        limit = rng.randint(1, 5000)
        end = off.rate_limit(start, available, limit)
        assert set(end) == set(available)
        for tp in tps:
            assert start[tp] <= end[tp] <= available[tp]
        lag = sum(available[tp] - start[tp] for tp in tps)
        # never more than the limit, except the round-up of shares below one (at most one each)
        assert off.total_lag(start, end) <= max(limit, 0) + len(tps)
        if lag <= limit:
            # everything fits: floor(limit * share) >= share
            assert end == available


def test_total_lag():
    assert off.total_lag({("t", 0): 5}, {("t", 0): 9, ("t", 1): 4}) == 8
    assert off.total_lag({("t", 0): 5}, {("t", 0): 9, ("t", 1): 4}, {("t", 1): 3}) == 5
    assert off.total_lag({("t", 0): 9}, {("t", 0): 5}) == 0


# ---------------------------------------------------------------------------------------------
# canonical JSON and ranges


def test_canonical_sorts_topics_and_partitions_numerically():
    offsets = {("b", 10): 1, ("b", 9): 2, ("a", 2): 3, ("b", 0): 4, ("a", 11): 5, ("a", 1): 6}
    c = off.canonical(offsets)
    assert list(c) == ["a", "b"]
    assert list(c["a"]) == ["1", "2", "11"]
    assert list(c["b"]) == ["0", "9", "10"]  # "10" after "9", not after "1"
    assert json.dumps(c) == '{"a": {"1": 6, "2": 3, "11": 5}, "b": {"0": 4, "9": 2, "10": 1}}'


def test_canonical_is_the_same_string_whatever_the_insertion_order():
    rng = random.Random(5)
    items = [((f"topic-{t}", p), rng.randint(0, 10**12)) for t in range(4) for p in range(13)]
    first = json.dumps(off.canonical(dict(items)))
    for _ in range(20):
        rng.shuffle(items)
        assert json.dumps(off.canonical(dict(items))) == first
    # and it survives Spark's JSON round trip (int keys come back as strings)
    assert json.dumps(off.canonical(off.from_json(json.loads(first)))) == first
    assert json.dumps(off.canonical(off.from_json(first))) == first


def test_canonical_values_are_plain_ints():
    import numpy as np

    c = off.canonical({("t", 0): np.int64(5)})
    assert type(c["t"]["0"]) is int
    assert json.dumps(c) == '{"t": {"0": 5}}'


def test_from_json_and_to_json():
    assert off.from_json(None) == {}
    assert off.from_json({"t": {"0": 4, "12": 7}}) == {("t", 0): 4, ("t", 12): 7}
    assert off.from_json('{"t": {"3": 1}}') == {("t", 3): 1}
    assert off.to_json({("t", 12): 7, ("t", 0): 4}) == {"t": {"0": 4, "12": 7}}


def test_ranges_deterministic_and_skip_empty():
    start = {("b", 0): 5, ("a", 10): 0, ("a", 2): 3, ("a", 9): 8}
    end = {("a", 9): 8, ("b", 0): 9, ("a", 2): 10, ("a", 10): 4, ("c", 0): 6}
    r = off.ranges(start, end)
    assert [(x.topic, x.partition, x.start, x.end) for x in r] == [
        ("a", 2, 3, 10), ("a", 10, 0, 4), ("b", 0, 5, 9), ("c", 0, 0, 6)]  # ("a", 9) is empty; ("c", 0) is new
    # same ranges in the same order whatever the dicts' order (a replay plans the same tasks)
    rng = random.Random(1)
    for _ in range(10):
        s_items, e_items = list(start.items()), list(end.items())
        rng.shuffle(s_items)
        rng.shuffle(e_items)
        assert off.ranges(dict(s_items), dict(e_items)) == r
    # and after the JSON round trip Spark does
    assert off.ranges(off.from_json(json.loads(json.dumps(off.canonical(start)))),
                      off.from_json(json.loads(json.dumps(off.canonical(end))))) == r
    assert off.ranges(start, start) == []


# ---------------------------------------------------------------------------------------------
# options


def opts(**kw) -> CaseInsensitiveDict:
    """Options as Spark hands them to the data source (case-insensitive, values strings)."""
    base = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
    base.update({k.replace("__", "."): str(v) for k, v in kw.items()})
    return CaseInsensitiveDict(base)


def test_options_defaults_and_names():
    o = source_options(opts(subscribe="a, b", includeHeaders="true", maxOffsetsPerTrigger="100",
                            kafka__client__id="me", kafka__fetch__max__bytes="1000"))
    assert o.subscribe == ("a", "b")
    assert o.bootstrap == "127.0.0.1:9092"
    assert o.isolation_level == 1  # read_committed by default
    assert o.fail_on_data_loss is True
    assert o.include_headers is True
    assert o.max_offsets_per_trigger == 100
    assert o.starting.kind == "latest"
    assert o.kafka["client.id"] == "me" and o.kafka["fetch.max.bytes"] == "1000"
    assert source_options(opts(subscribe="a"), batch=True).starting.kind == "earliest"
    assert source_options(opts(subscribe="a", kafka__isolation__level="read_uncommitted")).isolation_level == 0
    assert source_options(opts(subscribe="a", failOnDataLoss="false")).fail_on_data_loss is False
    o = source_options(opts(subscribe="a", minOffsetsPerTrigger="10", maxTriggerDelay="30s"))
    assert (o.min_offsets_per_trigger, o.max_trigger_delay_ms) == (10, 30_000)
    o = source_options(opts(assign='{"t": [2, 0]}', startingOffsets='{"t": {"0": -2, "2": 17}}'))
    assert o.assign == {"t": (0, 2)}
    assert (o.starting.kind, o.starting.per_partition) == ("json", {"t": {"0": -2, "2": 17}})
    o = source_options(opts(subscribePattern="t-.*", startingTimestamp="1700000000000"))
    assert o.matches("t-1") and not o.matches("xt-1")
    assert (o.starting.kind, o.starting.timestamp) == ("timestamp", 1_700_000_000_000)
    o = source_options(opts(subscribe="t", startingOffsetsByTimestamp='{"t": {"0": 5}}'))
    assert (o.starting.kind, o.starting.per_partition) == ("timestamp", {"t": {"0": 5}})
    assert source_options(opts(subscribe="t", kafka__max__partition__fetch__bytes="4096")).partition_max_bytes == 4096
    # in a streaming query -1 (latest) is a fine start
    assert source_options(opts(subscribe="t", startingOffsets='{"t": {"0": -1}}')).starting.per_partition == {"t": {"0": -1}}
    o = source_options(opts(subscribe="t", endingOffsets='{"t": {"0": 9, "1": -1}}'), batch=True)
    assert (o.ending.kind, o.ending.per_partition) == ("json", {"t": {"0": 9, "1": -1}})


@pytest.mark.parametrize("given,batch,names", [
    ({}, False, ["subscribe", "subscribePattern", "assign"]),
    ({"subscribe": "a", "assign": '{"a": [0]}'}, False, ["subscribe", "assign"]),
    ({"subscribe": "a", "subscribePattern": "a.*"}, False, ["subscribe", "subscribePattern"]),
    ({"subscribe": " , "}, False, ["subscribe"]),
    ({"subscribePattern": "a(["}, False, ["subscribePattern"]),
    ({"assign": "[0, 1]"}, False, ["assign"]),
    ({"assign": "not json"}, False, ["assign"]),
    ({"subscribe": "a", "startingOffsets": "first"}, False, ["startingOffsets"]),
    ({"subscribe": "a", "startingOffsets": '{"a": 5}'}, False, ["startingOffsets"]),
    ({"subscribe": "a", "startingOffsets": '{"a": {"0": "x"}}'}, False, ["startingOffsets"]),
    ({"subscribe": "a", "startingOffsets": "latest"}, True, ["startingOffsets"]),
    ({"subscribe": "a", "endingOffsets": "latest"}, False, ["endingOffsets"]),
    ({"subscribe": "a", "endingOffsets": "earliest"}, True, ["endingOffsets"]),
    ({"subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, True, ["endingOffsets", "a-0"]),
    ({"subscribe": "a", "startingOffsets": '{"a": {"0": -1}}'}, True, ["startingOffsets", "a-0"]),
    ({"subscribe": "a", "startingOffsets": '{"a": {"0": true}}'}, False, ["startingOffsets"]),
    ({"subscribe": "a", "kafka.max.partition.fetch.bytes": "1MB"}, False, ["kafka.max.partition.fetch.bytes"]),
    ({"subscribe": "a", "startingOffsets": "earliest", "startingTimestamp": "5"}, False,
     ["startingOffsets", "startingTimestamp"]),
    ({"subscribe": "a", "startingTimestamp": "yesterday"}, False, ["startingTimestamp"]),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "ten"}, False, ["maxOffsetsPerTrigger"]),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, False, ["maxOffsetsPerTrigger"]),
    ({"subscribe": "a", "minOffsetsPerTrigger": "100", "maxOffsetsPerTrigger": "10"}, False,
     ["minOffsetsPerTrigger", "maxOffsetsPerTrigger"]),
    ({"subscribe": "a", "maxTriggerDelay": "soon"}, False, ["maxTriggerDelay"]),
    ({"subscribe": "a", "failOnDataLoss": "maybe"}, False, ["failOnDataLoss"]),
    ({"subscribe": "a", "includeHeaders": "2"}, False, ["includeHeaders"]),
    ({"subscribe": "a", "kafka.isolation.level": "read_dirty"}, False, ["kafka.isolation.level"]),
    ({"subscribe": "a", "kafka.group.id": "g"}, False, ["kafka.group.id"]),
    ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, False, ["kafka.auto.offset.reset"]),
    ({"subscribe": "a", "kafka.enable.auto.commit": "true"}, False, ["kafka.enable.auto.commit"]),
])
def test_option_errors_name_the_option(given, batch, names):
    options = CaseInsensitiveDict({"kafka.bootstrap.servers": "127.0.0.1:9092", **given})
    with pytest.raises(OptionError) as e:
        source_options(options, batch=batch)
    for name in names:
        assert name in str(e.value)


def test_option_bootstrap_servers_required():
    with pytest.raises(OptionError, match="kafka.bootstrap.servers"):
        source_options(CaseInsensitiveDict({"subscribe": "a"}))


# ---------------------------------------------------------------------------------------------
# split_ranges: Spark's KafkaOffsetRangeCalculator (minPartitions, maxRecordsPerPartition), on
# examples worked by hand from its rules:
#   max:  every range cut into ceil(size / max) parts, near-equal, the last ones taking the rest
#   min:  if fewer ranges than min: part(range) = max(round(size / total * min), 1); ranges with
#         one part stay whole (their whole partition), the rest share max(min - #whole, 1) parts
#         in proportion to size


def R(t, p, s, e):
    return off.OffsetRange(t, p, s, e)


def test_split_ranges_without_options_drops_only_empty_ranges():
    ranges = [R("a", 0, 0, 10), R("a", 1, 5, 5), R("b", 0, 3, 9)]
    assert off.split_ranges(ranges) == [R("a", 0, 0, 10), R("b", 0, 3, 9)]
    assert off.split_ranges(ranges, min_partitions=2) == [R("a", 0, 0, 10), R("b", 0, 3, 9)]


def test_split_ranges_min_partitions_splits_one_range():
    assert off.split_ranges([R("t", 0, 1, 4)], min_partitions=3) == [R("t", 0, 1, 2), R("t", 0, 2, 3), R("t", 0, 3, 4)]


def test_split_ranges_min_partitions_splits_the_skewed_partition_only():
    # total 24: a-0 gets round(4/24*3 = 0.5) = 1 part (stays whole); b-0 shares max(3-1, 1) = 2
    # parts over the split total 20: round(20/20*2) = 2
    got = off.split_ranges([R("a", 0, 1, 5), R("b", 0, 1, 21)], min_partitions=3)
    assert got == [R("a", 0, 1, 5), R("b", 0, 1, 11), R("b", 0, 11, 21)]


def test_split_ranges_max_records_per_partition():
    # ceil(10/4) = 3 parts: 10//3 = 3, 7//2 = 3, 4
    assert off.split_ranges([R("t", 0, 0, 10)], max_records=4) == [R("t", 0, 0, 3), R("t", 0, 3, 6), R("t", 0, 6, 10)]
    assert off.split_ranges([R("t", 0, 0, 4)], max_records=4) == [R("t", 0, 0, 4)]


def test_split_ranges_max_records_then_min_partitions():
    # max 5: t-0 -> [0,5) [5,10); u-0 [0,2) stays. 3 ranges < 4: total 12, u-0 round(2/12*4) = 1
    # stays whole; the t-0 halves share 3 parts over 10: round(5/10*3 = 1.5) = 2 each
    got = off.split_ranges([R("t", 0, 0, 10), R("u", 0, 0, 2)], min_partitions=4, max_records=5)
    assert got == [R("t", 0, 0, 2), R("t", 0, 2, 5), R("t", 0, 5, 7), R("t", 0, 7, 10), R("u", 0, 0, 2)]


def test_split_ranges_cover_every_offset_once_and_are_deterministic():
    rng = random.Random(7)
    for _ in range(300):
        ranges = []
        for p in range(rng.randint(1, 5)):
            s = rng.randint(0, 1000)
            ranges.append(R("t", p, s, s + rng.choice([0, 1, 2, rng.randint(0, 5000)])))
        mn = rng.choice([None, 1, 3, 8, 50])
        mx = rng.choice([None, 1, 7, 100, 10_000])
        got = off.split_ranges(ranges, mn, mx)
        assert got == off.split_ranges(list(ranges), mn, mx)
        for r in ranges:
            parts = [g for g in got if g.partition == r.partition]
            covered = [o for g in parts for o in range(g.start, g.end)]
            assert covered == list(range(r.start, r.end))
            assert all(g.end > g.start for g in parts)
            if mx is not None:
                assert all(g.end - g.start <= mx for g in parts)


# ---------------------------------------------------------------------------------------------
# options Spark users pass: implemented, or refused with a message naming them


def test_ending_timestamps_and_the_starting_strategy():
    o = source_options(opts(subscribe="t", endingTimestamp="1700000000000"), batch=True)
    assert (o.ending.kind, o.ending.timestamp) == ("timestamp", 1_700_000_000_000)
    o = source_options(opts(subscribe="t", startingOffsetsByTimestamp='{"t": {"0": 5, "1": 6}}',
                            endingOffsetsByTimestamp='{"t": {"0": 9, "1": 6}}'), batch=True)
    assert (o.ending.kind, o.ending.per_partition) == ("timestamp", {"t": {"0": 9, "1": 6}})
    assert o.starting_timestamp_strategy == "error"  # Spark's default
    o = source_options(opts(subscribe="t", startingTimestamp="5", startingOffsetsByTimestampStrategy="LATEST"))
    assert o.starting_timestamp_strategy == "latest"


def test_partitioning_and_offset_fetch_options():
    o = source_options(opts(subscribe="t"))
    assert (o.min_partitions, o.max_records_per_partition) == (None, None)
    assert (o.fetch_offset_num_retries, o.fetch_offset_retry_interval_ms) == (3, 1000)  # Spark's defaults
    o = source_options(opts(subscribe="t", minPartitions="8", maxRecordsPerPartition="1000",
                            fetchOffset__numRetries="10", fetchOffset__retryIntervalMs="50"), batch=True)
    assert (o.min_partitions, o.max_records_per_partition) == (8, 1000)
    assert (o.fetch_offset_num_retries, o.fetch_offset_retry_interval_ms) == (10, 50)


def test_every_spark_kafka_source_option_is_known():
    spark_options = {  # Spark's KafkaSourceProvider option keys (4.x), with valid values
        "assign": None, "subscribe": "t", "subscribePattern": None, "startingOffsets": "earliest",
        "failOnDataLoss": "false", "minPartitions": "2", "maxRecordsPerPartition": "10",
        "fetchOffset.numRetries": "2", "fetchOffset.retryIntervalMs": "10", "kafkaConsumer.pollTimeoutMs": "1000",
        "includeHeaders": "true", "endingOffsets": "latest",
        "startingOffsetsByTimestampStrategy": "latest",
    }
    given = CaseInsensitiveDict({"kafka.bootstrap.servers": "h:1", "kafka.client.id": "c",
                                 **{k: v for k, v in spark_options.items() if v is not None}})
    source_options(given, batch=True)
    stream = CaseInsensitiveDict({k: v for k, v in given.items() if k != "endingoffsets"})
    source_options(CaseInsensitiveDict({**stream, "maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "1",
                                        "maxTriggerDelay": "1s"}))


def test_load_time_check_leaves_mode_rules_to_the_reader():
    # schema() cannot tell spark.read from spark.readStream: the mode's own rules wait
    both = opts(subscribe="t", startingOffsets="latest", endingOffsets="latest")
    source_options(both, batch=None)
    with pytest.raises(OptionError, match="endingOffsets is for batch queries"):
        source_options(both, batch=False)
    with pytest.raises(OptionError, match="startingOffsets=latest"):
        source_options(both, batch=True)
    with pytest.raises(OptionError, match="minPartitions"):
        source_options(opts(subscribe="t", minPartitions="0"), batch=None)


@pytest.mark.parametrize("given,batch,names", [
    ({"subscribe": "a", "endingTimestamp": "5"}, False, ["endingTimestamp", "batch"]),
    ({"subscribe": "a", "endingOffsetsByTimestamp": '{"a": {"0": 5}}'}, False, ["endingOffsetsByTimestamp"]),
    ({"subscribe": "a", "endingTimestamp": "soon"}, True, ["endingTimestamp"]),
    ({"subscribe": "a", "endingTimestamp": "5", "endingOffsets": "latest"}, True, ["endingOffsets", "endingTimestamp"]),
    ({"subscribe": "a", "startingOffsetsByTimestamp": '{"a": {"0": 5}}', "endingOffsetsByTimestamp": '{"a": {"1": 5}}'},
     True, ["startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "a-0", "a-1"]),
    ({"subscribe": "a", "startingOffsetsByTimestamp": '{"a": {"0": 9}}', "endingOffsetsByTimestamp": '{"a": {"0": 5}}'},
     True, ["a-0"]),
    ({"subscribe": "a", "startingOffsetsByTimestamp": "latest"}, False, ["startingOffsetsByTimestamp"]),
    ({"subscribe": "a", "startingOffsetsByTimestamp": '{"a": {"0": -5}}'}, False, ["startingOffsetsByTimestamp"]),
    ({"subscribe": "a", "startingOffsetsByTimestampStrategy": "earliest"}, False, ["startingOffsetsByTimestampStrategy"]),
    ({"subscribe": "a", "minPartitions": "0"}, False, ["minPartitions"]),
    ({"subscribe": "a", "minPartitions": "many"}, True, ["minPartitions"]),
    ({"subscribe": "a", "maxRecordsPerPartition": "0"}, True, ["maxRecordsPerPartition"]),
    ({"subscribe": "a", "fetchOffset.numRetries": "0"}, False, ["fetchOffset.numRetries"]),
    ({"subscribe": "a", "fetchOffset.retryIntervalMs": "-1"}, False, ["fetchOffset.retryIntervalMs"]),
    ({"subscribe": "a", "kafka.interceptor.classes": "x.Y"}, False, ["kafka.interceptor.classes"]),
    ({"subscribe": "a", "endingTimestmap": "5"}, True, ["endingtimestmap", "unknown source option"]),
    ({"subscribe": "a", "maxOffsetPerTrigger": "5"}, False, ["maxoffsetpertrigger"]),
    ({"subscribe": "a", "groupIdPrefix": "team-a"}, False, ["groupIdPrefix", "no consumer group"]),
])
def test_new_option_errors_name_the_option(given, batch, names):
    options = CaseInsensitiveDict({"kafka.bootstrap.servers": "127.0.0.1:9092", **given})
    with pytest.raises(OptionError) as e:
        source_options(options, batch=batch)
    for name in names:
        assert name in str(e.value)


def sink(**kw) -> CaseInsensitiveDict:
    base = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t"}
    base.update({k.replace("__", "."): str(v) for k, v in kw.items()})
    return CaseInsensitiveDict(base)


def test_sink_compression_type_and_level():
    assert sink_options(sink()).compression == 0
    for name, codec in COMPRESSION_CODECS.items():
        assert sink_options(sink(kafka__compression__type=name)).compression == codec
    with pytest.raises(OptionError, match="must be one of"):  # case-sensitive, as Kafka's ConfigDef.ValidString
        sink_options(sink(kafka__compression__type="GZIP"))
    o = sink_options(sink(kafka__compression__type="zstd", kafka__compression__zstd__level="7",
                          kafka__compression__gzip__level="2"))
    assert (o.compression, o.compression_level) == (4, 7)  # the gzip level is for gzip only
    for bad, name in [({"kafka__compression__type": "brotli"}, "kafka.compression.type"),
                      ({"kafka__compression__type": "gzip", "kafka__compression__gzip__level": "12"},
                       "kafka.compression.gzip.level"),
                      ({"kafka__compression__lz4__level": "x"}, "kafka.compression.lz4.level")]:
        with pytest.raises(OptionError, match=name.replace(".", r"\.")):
            sink_options(sink(**bad))


def test_sink_refuses_unknown_options_and_keeps_sparks_own():
    o = sink_options(sink(checkpointLocation="/tmp/c", queryName="q", path="/p", kafka__acks="all",
                          oncelog__test__barrier="false", deliveryGuarantee="at-least-once"))
    assert o.checkpoint_location == "/tmp/c" and barrier_off(o)
    with pytest.raises(OptionError, match="unknown sink option deliveryguarantees"):
        sink_options(sink(deliveryGuarantees="exactly-once"))
    with pytest.raises(OptionError, match="subscribe"):
        sink_options(sink(subscribe="t"))  # a source option given to the sink
