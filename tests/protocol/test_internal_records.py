"""The internal-record codec and every decoder on it refuse hostile or corrupt bytes with a
ValueError (TruncatedRecord, UnicodeDecodeError, an unknown version) and nothing else: replay
skips such a record with a warning instead of failing the broker's start, and a group member's
unreadable subscription has no topics."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oncelog.groups import records as group_records
from oncelog.groups.state import consumer_subscription_topics
from oncelog.protocol.internal_records import Reader, TruncatedRecord, Writer
from oncelog.txn import records as txn_records

DECODERS = [group_records.decode_key, group_records.decode_offset_value, group_records.decode_group_value,
            txn_records.decode_key, lambda b: txn_records.decode_value("t", b)]


def test_truncation_is_refused_never_shortened():
    whole = Writer().i16(1).string("group").bytes_(b"abc").to_bytes()
    for cut in range(len(whole)):
        r = Reader(whole[:cut])
        with pytest.raises(TruncatedRecord):
            r.i16(), r.string(), r.bytes_()
    r = Reader(whole)
    assert (r.i16(), r.string(), r.bytes_()) == (1, "group", b"abc")


def test_a_huge_declared_count_reads_until_the_bytes_end_then_refuses():
    data = Writer().i32(2_000_000_000).i16(1).to_bytes()
    with pytest.raises(TruncatedRecord):
        Reader(data).array(Reader.i16)


@settings(max_examples=3000, deadline=None)
@given(st.binary(max_size=200), st.sampled_from(range(len(DECODERS))))
def test_decoders_refuse_any_bytes_with_a_value_error_only(data, which):
    try:
        decoded = DECODERS[which](data)
    except ValueError:
        return  # refused, as replay expects; any other exception fails the test
    assert decoded is not None


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=200))
def test_any_subscription_bytes_read_as_topics_or_unknown(data):
    """Any bytes: a set of topics, or None for a subscription that does not parse (which Kafka's
    ClassicGroup counts as subscribed to every topic: OffsetDelete refuses); never an exception."""
    topics = consumer_subscription_topics(data)
    assert topics is None or isinstance(topics, set)


def test_a_valid_subscription_and_a_truncated_one():
    good = Writer().i16(1).array(["a", "b"], Writer.string).bytes_(b"").to_bytes()
    assert consumer_subscription_topics(good) == {"a", "b"}
    assert consumer_subscription_topics(good[:7]) is None  # truncated: unknown, not "no topics"
