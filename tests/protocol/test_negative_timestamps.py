"""The client's response decoding reads a negative ``datetime_i64`` as Kafka means it, on bytes.

kio 0.6.5 refuses a non-nullable ``datetime_i64`` of -1 ("Cannot parse negative timestamp"), which
Apache Kafka and oncelog send as DescribeTransactions' start time of an Empty transactional id.
:func:`oncelog.client.wire.decode_response` then decodes through
:mod:`oncelog.protocol.timestamps`: -1 becomes ``None`` at exactly the field that held it, any
other negative value the instant it encodes, every other field as kio reads it; unknown tagged
fields are skipped on the way; a frame that cannot hold what it declares is refused before kio (the guard).

Frames are built with kio's writers, a marker instant written where the negative value goes,
then patched in the bytes — the bytes a broker would send.
"""

from __future__ import annotations

import datetime
import io
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.serial.errors import OutOfBoundValue, SerialError
from kio.static.constants import EntityType

from oncelog.client.wire import decode_response, request_module
from oncelog.protocol import codec
from oncelog.protocol.timestamps import meant

UTC = datetime.timezone.utc
CORRELATION_ID = 4242


def at_ms(ms: int) -> datetime.datetime:
    return datetime.datetime(1970, 1, 1, tzinfo=UTC) + datetime.timedelta(milliseconds=ms)


# Distinct instants whose 8 bytes occur nowhere else in the frames below.
MARK_A, MARK_B, REAL = 1_600_000_000_111, 1_600_000_000_222, 1_764_000_000_123


def frame_of(response, header_v1: bool) -> bytes:
    """A response frame as decode_response takes it: correlation id, header tags, body."""
    out = io.BytesIO()
    codec.writer(type(response))(out, response)
    return struct.pack(">i", CORRELATION_ID) + (b"\x00" if header_v1 else b"") + out.getvalue()


def patch(frame: bytes, mark_ms: int, value: int) -> bytes:
    old = struct.pack(">q", mark_ms)
    assert frame.count(old) == 1
    return frame.replace(old, struct.pack(">q", value))


def describe_transactions(*starts_ms: int) -> tuple[type, bytes]:
    """A DescribeTransactions v0 response frame, one transactional id per start time."""
    req = request_module(65, 0).DescribeTransactionsRequest
    mod = load_payload_module(65, 0, EntityType.response)
    states = tuple(
        mod.TransactionState(error_code=ErrorCode.none, transactional_id=f"t{i}", transaction_state="Empty",
                             transaction_timeout=datetime.timedelta(seconds=60), transaction_start_time=at_ms(ms),
                             producer_id=1000 + i, producer_epoch=i,
                             topics=(mod.TopicData(topic="orders", partitions=(0, i)),))
        for i, ms in enumerate(starts_ms))
    resp = mod.DescribeTransactionsResponse(throttle_time=datetime.timedelta(0), transaction_states=states)
    return req, frame_of(resp, header_v1=True)


def test_kio_alone_refuses_the_minus_one_start_time():
    """The bug this path exists for: kio's native reader refuses it."""
    _, frame = describe_transactions(MARK_A)
    with pytest.raises(OutOfBoundValue, match="negative timestamp"):
        codec.reader(codec.response_class(65, 0))(patch(frame, MARK_A, -1), 5)


def test_minus_one_start_time_decodes_as_none_and_the_rest_as_sent():
    req, frame = describe_transactions(REAL, MARK_A, REAL + 1)
    correlation_id, resp = decode_response(patch(frame, MARK_A, -1), req)
    assert correlation_id == CORRELATION_ID
    first, empty, third = resp.transaction_states
    assert empty.transaction_start_time is None
    # the fields around it, and the other array elements, are untouched
    assert (empty.transactional_id, empty.producer_id, empty.producer_epoch) == ("t1", 1001, 1)
    assert empty.transaction_timeout == datetime.timedelta(seconds=60)
    assert [tuple(t.partitions) for t in empty.topics] == [(0, 1)]
    assert first.transaction_start_time == at_ms(REAL)
    assert third.transaction_start_time == at_ms(REAL + 1)
    assert (third.transactional_id, third.producer_id) == ("t2", 1002)


def test_several_negative_fields_each_get_their_own_value():
    req, frame = describe_transactions(MARK_A, MARK_B)
    _, resp = decode_response(patch(patch(frame, MARK_A, -1), MARK_B, -2), req)
    assert resp.transaction_states[0].transaction_start_time is None
    # no Kafka field defines -2: the exact instant it encodes, not a loss
    assert resp.transaction_states[1].transaction_start_time == datetime.datetime(1969, 12, 31, 23, 59, 59, 998000,
                                                                                 tzinfo=UTC)


def test_a_frame_without_negative_timestamps_decodes_as_kio_decodes_it():
    req, frame = describe_transactions(REAL, 0)
    _, resp = decode_response(frame, req)
    assert resp == codec.reader(codec.response_class(65, 0))(frame, 5)[0]


def produce_response(version: int, log_append_ms: int):
    """A Produce response of two topics, two partitions each; the last partition carries the
    marker as its log_append_time (a nullable datetime_i64 in kio)."""
    mod = load_payload_module(0, version, EntityType.response)

    def partition(index: int, ms: int):
        return mod.PartitionProduceResponse(index=index, error_code=ErrorCode.none, base_offset=10 * index,
                                            log_append_time=at_ms(ms), log_start_offset=0,
                                            record_errors=(), error_message=None)

    topics = (mod.TopicProduceResponse(name="a", partition_responses=(partition(0, REAL), partition(1, REAL))),
              mod.TopicProduceResponse(name="b", partition_responses=(partition(0, REAL), partition(1, log_append_ms))))
    resp = mod.ProduceResponse(responses=topics, throttle_time=datetime.timedelta(0))
    return request_module(0, version).ProduceRequest, frame_of(resp, header_v1=version >= 9)


@pytest.mark.parametrize("version", [8, 9])  # classic and flexible encodings
def test_nested_nullable_timestamps(version):
    """Produce's log_append_time is nullable in kio: -1 is kio's own None, -5 goes the slow path
    and lands on the right partition of the right topic."""
    req, frame = produce_response(version, MARK_A)
    _, resp = decode_response(patch(frame, MARK_A, -1), req)
    assert resp.responses[1].partition_responses[1].log_append_time is None
    _, resp = decode_response(patch(frame, MARK_A, -5), req)
    parts = [p for t in resp.responses for p in t.partition_responses]
    assert [p.log_append_time for p in parts] == [at_ms(REAL)] * 3 + [at_ms(-5)]
    assert [p.base_offset for p in parts] == [0, 10, 0, 10]


def test_an_unknown_tagged_field_is_skipped_with_the_negative_timestamp():
    """KIP-482: a receiver skips tags it does not know; kio raises KeyError on them."""
    req, frame = describe_transactions(MARK_A)
    assert frame[-1] == 0  # the top entity's tagged-field section: none
    tagged = frame[:-1] + b"\x01" + b"\x63\x03abc"  # one field: tag 99, 3 bytes
    with pytest.raises(KeyError):
        codec.reader(codec.response_class(65, 0))(tagged, 5)
    _, resp = decode_response(tagged, req)
    assert resp.transaction_states[0].transaction_start_time == at_ms(MARK_A)
    _, resp = decode_response(patch(tagged, MARK_A, -1), req)
    assert resp.transaction_states[0].transaction_start_time is None
    assert resp.transaction_states[0].transactional_id == "t0"


def test_a_truncated_frame_is_a_decode_error_before_kio():
    """Cut inside the array: the guard refuses it before kio (and before the slow path)."""
    req, frame = describe_transactions(MARK_A)
    frame = patch(frame, MARK_A, -1)
    with pytest.raises(codec.DecodeError, match="ends inside the response"):
        decode_response(frame[:-12], req)


def test_a_huge_array_count_is_a_decode_error_not_an_abort():
    """A response declaring 2^31-2 transaction states in a few bytes (kio alone would reserve
    their memory up front and abort the process): refused by the guard, naming the field."""
    req, frame = describe_transactions(MARK_A)
    header_and_throttle = 4 + 1 + 4  # correlation id, header tags, throttle_time_ms
    hostile = frame[:header_and_throttle] + bytes.fromhex("ffffffff0f") + frame[header_and_throttle + 1:]
    with pytest.raises(codec.DecodeError, match="transaction_states"):
        decode_response(hostile, req)


def test_meant():
    assert meant(-1) is None
    assert meant(-1000) == datetime.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC)


@settings(max_examples=1500, deadline=None)
@given(st.binary(max_size=120), st.integers(min_value=4, max_value=60))
def test_hostile_response_bytes_decode_or_raise_kios_error(noise, cut):
    """A response frame is bytes from the network too: a DescribeTransactions frame with a -1
    start time, cut and overwritten with arbitrary bytes, either decodes or raises a decode error
    (the guard's or kio's) — never another exception, never a process abort (kio's array reader
    alone aborts on a huge count)."""
    request_cls, frame = describe_transactions(-1)
    hostile = frame[:cut] + noise
    try:
        decode_response(hostile, request_cls)
    except (SerialError, KeyError, ValueError):  # kio's errors (KeyError: an unknown tag)
        pass
