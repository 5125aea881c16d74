"""SaslAuthenticate (key 36), v0-2: one step of the SASL exchange started by SaslHandshake.

The mechanism (:mod:`oncelog.security.sasl`) takes the client's bytes and gives the server's;
when it is done the connection is authenticated as its principal. A failure is answered with
SASL_AUTHENTICATION_FAILED and Kafka's message (the client cannot tell an unknown user from a
wrong password), logged with the client's address and the real reason, and the connection is
closed after the answer.

Version notes: v1 adds ``session_lifetime_ms`` (KIP-368): 0 here, no re-authentication is required
(``connections.max.reauth.ms`` is not implemented yet); v2 is flexible.
"""

from __future__ import annotations

import datetime
import logging

from kio.schema.errors import ErrorCode

from ..security.sasl import SaslAuthenticationFailed
from ..security.session import SaslState
from ._base import OK, build, response_module

NO_LIFETIME = datetime.timedelta(0)  # no re-authentication required

API_KEY = 36
MIN_VERSION = 0
MAX_VERSION = 2

log = logging.getLogger("oncelog.security")


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    session = ctx.session
    if session is None or session.state is not SaslState.AUTHENTICATE:
        if session is not None and session.sasl:
            session.state = SaslState.FAILED
        return build(m.SaslAuthenticateResponse, error_code=ErrorCode.illegal_sasl_state,
                     error_message="Unexpected SaslAuthenticate request: no SASL handshake in progress",
                     auth_bytes=b"", session_lifetime=NO_LIFETIME)
    try:
        answer, done = session.mechanism.step(bytes(request.auth_bytes))
    except SaslAuthenticationFailed as exc:
        session.state = SaslState.FAILED
        log.warning("SASL %s authentication failed from %s: %s", session.mechanism_name, ctx.peer,
                    exc.detail or exc)
        return build(m.SaslAuthenticateResponse, error_code=ErrorCode.sasl_authentication_failed,
                     error_message=str(exc), auth_bytes=b"", session_lifetime=NO_LIFETIME)
    if done:
        session.principal = session.mechanism.principal
        session.state = SaslState.AUTHENTICATED
        session.mechanism = None
        log.info("%s authenticated with SASL %s from %s", session.principal, session.mechanism_name, ctx.peer)
    return build(m.SaslAuthenticateResponse, error_code=OK, error_message=None, auth_bytes=answer, session_lifetime=NO_LIFETIME)
