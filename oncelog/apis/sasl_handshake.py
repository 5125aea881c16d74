"""SaslHandshake (key 17), v1: the client names the SASL mechanism it will use; the answer lists
the mechanisms the connection's listener offers (``sasl.enabled.mechanisms``, those configured).

Version notes: v0 (tokens as raw frames outside SaslAuthenticate, Kafka 0.10's framing) is not
served: every client since Kafka 1.0, librdkafka, kafka-python and aiokafka send v1 then
SaslAuthenticate. On a listener without SASL, or once the mechanism is chosen, the answer is
ILLEGAL_SASL_STATE as Kafka's; a mechanism not offered is UNSUPPORTED_SASL_MECHANISM (the
connection is then closed, as Kafka's SaslServerAuthenticator does)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..security.sasl import UnsupportedSaslMechanism
from ..security.session import SaslState
from ._base import OK, build, response_module

API_KEY = 17
MIN_VERSION = 1
MAX_VERSION = 1


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    session = ctx.session
    if session is None or not session.sasl or session.state is not SaslState.HANDSHAKE:
        return build(m.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    mechanisms = ctx.broker.sasl_for(session.listener)
    offered = mechanisms.enabled_mechanisms
    try:
        session.mechanism = mechanisms.start(request.mechanism)
    except UnsupportedSaslMechanism:
        session.state = SaslState.FAILED
        return build(m.SaslHandshakeResponse, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=offered)
    session.mechanism_name = request.mechanism
    session.state = SaslState.AUTHENTICATE
    return build(m.SaslHandshakeResponse, error_code=OK, mechanisms=offered)
