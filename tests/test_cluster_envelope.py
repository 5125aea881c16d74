"""The Envelope a cluster's follower sends the controller (oncelog.cluster): served only on the
control socket to the nodes' own principal, handled as the client's principal, and never a way
to act as a node. In process: node 1 of a two-node cluster, no other node running."""

from __future__ import annotations

import asyncio
import datetime
import io

import pytest
from kio.schema.errors import ErrorCode

from oncelog.broker import Broker, ProtocolViolation
from oncelog.cluster import CONTROL_LISTENER, NODE_PRINCIPAL
from oncelog.config.settings import BrokerConfig
from oncelog.protocol.requests import decode_response, request_module, write_request
from oncelog.security.session import Session


def _frame(request, correlation_id: int = 7) -> bytes:
    out = io.BytesIO()
    write_request(out, request, correlation_id, "test")
    return out.getvalue()


def _create_topics(name: str) -> bytes:
    m = request_module(19, 7)
    return _frame(m.CreateTopicsRequest(topics=(m.CreatableTopic(
        name=name, num_partitions=2, replication_factor=-1, assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=5), validate_only=False), correlation_id=41)


def _envelope(inner: bytes, principal: bytes | None = b"User:alice") -> bytes:
    m = request_module(58, 0)
    return _frame(m.EnvelopeRequest(request_data=inner, request_principal=principal, client_host_address=b"10.0.0.9"))


def _answer(broker: Broker, frame: bytes, session: Session):
    result = broker.handle_frame(frame, "peer:1", session)
    if not isinstance(result, list):
        result = asyncio.run(result)
    _, envelope = decode_response(b"".join(result)[4:], type(request_module(58, 0).EnvelopeRequest(
        request_data=b"", request_principal=None, client_host_address=b"")))
    return envelope


@pytest.fixture
def controller(tmp_path):
    broker = Broker(BrokerConfig(data_dir=str(tmp_path), nodes=2, node_id=1))
    broker.open()
    return broker


NODE = Session(CONTROL_LISTENER, False, NODE_PRINCIPAL)


def test_a_forwarded_create_is_made_and_answered_inside_the_envelope(controller):
    envelope = _answer(controller, _envelope(_create_topics("forwarded")), NODE)
    assert envelope.error_code == ErrorCode.none
    _, inner = decode_response(envelope.response_data, type(request_module(19, 7).CreateTopicsRequest(
        topics=(), timeout=datetime.timedelta(0), validate_only=False)))
    assert inner.topics[0].error_code == ErrorCode.none
    assert controller.metadata.topics.get("forwarded").partitions == 2


@pytest.mark.parametrize("principal", [b"Node:cluster", b"Node:anything", b"", None])
def test_an_envelope_cannot_carry_a_node_or_no_principal(controller, principal):
    envelope = _answer(controller, _envelope(_create_topics("escalated"), principal), NODE)
    assert envelope.error_code == ErrorCode.principal_deserialization_failure and envelope.response_data is None
    assert controller.metadata.topics.get("escalated") is None


@pytest.mark.parametrize("inner", [b"", b"\x00", b"\xff" * 9, _create_topics("x")[:12]])
def test_a_malformed_inner_request_is_refused_not_raised(controller, inner):
    envelope = _answer(controller, _envelope(inner), NODE)
    assert envelope.error_code == ErrorCode.invalid_request


def test_nested_envelopes_are_refused(controller):
    envelope = _answer(controller, _envelope(_envelope(_create_topics("nested"))), NODE)
    assert envelope.error_code == ErrorCode.invalid_request
    assert controller.metadata.topics.get("nested") is None


@pytest.mark.parametrize("session", [None, Session("PLAINTEXT", False, NODE_PRINCIPAL),
                                     Session(CONTROL_LISTENER, False, "User:alice")])
def test_an_envelope_from_anything_but_a_node_on_the_control_socket_is_an_unknown_api(controller, session):
    with pytest.raises(ProtocolViolation):
        controller.handle_frame(_envelope(_create_topics("sneaky")), "peer:1", session)
    assert controller.metadata.topics.get("sneaky") is None


def test_one_node_knows_no_envelope(tmp_path):
    broker = Broker(BrokerConfig(data_dir=str(tmp_path)))
    broker.open()
    with pytest.raises(ProtocolViolation):
        broker.handle_frame(_envelope(_create_topics("one")), "peer:1", NODE)
