"""The consumer protocol's bytes (:mod:`oncelog.protocol.consumer_protocol`): the one decoder of a
ConsumerProtocolAssignment, for the coordinator (migration) and the admin's DescribeGroups alike."""

from __future__ import annotations

import pytest

from oncelog.protocol.consumer_protocol import encode_assignment, parse_assignment, parse_subscription

# v0 and v3 as Kafka's ConsumerProtocol writes them: topic a [0, 2], topic "bé" [1]; null user data
ASSIGNMENT_V0 = "0000" "00000002" "0001" "61" "00000002" "00000000" "00000002" "0003" "62c3a9" "00000001" "00000001" "ffffffff"


def test_assignment_bytes_are_pinned():
    parts = {"bé": frozenset({1}), "a": frozenset({2, 0})}
    assert encode_assignment(parts, 0).hex() == ASSIGNMENT_V0
    assert encode_assignment(parts, 3).hex() == "0003" + ASSIGNMENT_V0[4:]
    assert encode_assignment(parts, 7)[:2] == b"\x00\x03" and encode_assignment(parts, -1)[:2] == b"\x00\x00"
    assert parse_assignment(bytes.fromhex(ASSIGNMENT_V0)) == parts


def test_assignment_reading_rules():
    """Later versions' fields are ignored; user data need not be there; a topic listed twice is
    the union; a null topic is skipped."""
    assert parse_assignment(bytes.fromhex("0003" "00000000" "00000003" "616263")) == {}
    assert parse_assignment(bytes.fromhex("0001" "00000000")) == {}
    twice = "0000" "00000003" "0001" "61" "00000001" "00000000" "ffff" "00000000" "0001" "61" "00000001" "00000005"
    assert parse_assignment(bytes.fromhex(twice)) == {"a": frozenset({0, 5})}


@pytest.mark.parametrize("data_hex", ["", "00", "ffff00000000", "0000" "00000001" "0002" "61",
                                      "0000" "00000001" "0002" "c328" "00000000", "0000" "7fffffff"])
def test_assignments_that_do_not_parse_are_none(data_hex):
    assert parse_assignment(bytes.fromhex(data_hex)) is None


def test_subscriptions():
    v0 = "0000" "00000002" "0001" "61" "0001" "62" "ffffffff"
    assert parse_subscription(bytes.fromhex(v0)) == (0, ("a", "b"), {})
    v1 = "0001" "00000001" "0001" "61" "00000000" "00000001" "0001" "61" "00000001" "00000003"
    assert parse_subscription(bytes.fromhex(v1)) == (1, ("a",), {"a": frozenset({3})})
    v3 = v1.replace("0001", "0003", 1) + "00000007" + "ffff"  # generation, null rack: not read
    assert parse_subscription(bytes.fromhex(v3)) == (3, ("a",), {"a": frozenset({3})})
    assert parse_subscription(bytes.fromhex("ffff" "00000000" "ffffffff")) is None
    assert parse_subscription(bytes.fromhex(v1)[:-1]) is None
