"""SaslHandshake (key 17), v0-1: the client names the SASL mechanism it will use; the answer lists
the mechanisms the connection's listener offers (``sasl.enabled.mechanisms``, those configured).

An authenticated connection may send it again to re-authenticate (KIP-368), with the same
mechanism. On a listener without SASL the answer is ILLEGAL_SASL_STATE as Kafka's; while an
exchange is under way it is ILLEGAL_SASL_STATE and the connection is then closed (Kafka's
SaslServerAuthenticator); a mechanism not offered is UNSUPPORTED_SASL_MECHANISM (the connection
is then closed, as Kafka's SaslServerAuthenticator does).

Version notes:

SaslHandshake: v0-1

- v0: the oldest served: after it the tokens travel as raw size-prefixed frames, not
  SaslAuthenticate requests (Kafka 0.10's framing; the server's connection code exchanges them with
  the mechanism, and a failure closes the connection without an answer, as Kafka's).
- v1: followed by SaslAuthenticate requests (KIP-152; every client since Kafka 1.0: librdkafka,
  kafka-python, aiokafka).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..security.sasl import UnsupportedSaslMechanism
from ..security.session import SaslState
from ._base import OK, build, response_module

API_KEY = 17
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    session = ctx.session
    reauthentication = session is not None and session.sasl and session.state is SaslState.AUTHENTICATED
    if session is None or not session.sasl or session.state not in (SaslState.HANDSHAKE, SaslState.AUTHENTICATED):
        if session is not None and session.sasl:
            # A second handshake during an exchange: Kafka answers ILLEGAL_SASL_STATE ("Unexpected
            # Kafka request of type SASL_HANDSHAKE during SASL authentication") and closes.
            session.state = SaslState.FAILED
        return build(m.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    mechanisms = ctx.broker.sasl_for(session.listener)
    offered = mechanisms.enabled_mechanisms
    if reauthentication and request.mechanism != session.mechanism_name and request.mechanism in offered:
        # KIP-368: a session re-authenticates with the mechanism it began with. Kafka answers the
        # handshake as any other and fails the exchange at its first token (REAUTH_BAD_MECHANISM:
        # the connection is closed without an answer, Session.admit / the raw-token path).
        session.reauth_bad_mechanism = True
        session.mechanism = None
        session.raw_tokens = ctx.api_version == 0
        session.state = SaslState.AUTHENTICATE
        return build(m.SaslHandshakeResponse, error_code=OK, mechanisms=offered)
    try:
        session.mechanism = mechanisms.start(request.mechanism, reauthentication=reauthentication)
    except UnsupportedSaslMechanism:
        session.state = SaslState.FAILED
        return build(m.SaslHandshakeResponse, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=offered)
    session.mechanism_name = request.mechanism
    session.reauthenticating = reauthentication
    session.raw_tokens = ctx.api_version == 0
    session.state = SaslState.AUTHENTICATE
    return build(m.SaslHandshakeResponse, error_code=OK, mechanisms=offered)
