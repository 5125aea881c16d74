"""SaslAuthenticate (key 36), v0-2: one step of the SASL exchange started by SaslHandshake.

The mechanism (:mod:`oncelog.security.sasl`) takes the client's bytes and gives the server's;
when it is done the connection is authenticated as its principal. A failure is answered with
SASL_AUTHENTICATION_FAILED and Kafka's message (the client cannot tell an unknown user from a
wrong password), logged with the client's address and the real reason, and the connection is
closed after the answer.

Version notes:

SaslAuthenticate: v0-2

- v0: the oldest served (KIP-152).
- v1: ``session_lifetime_ms`` in the answer (KIP-368): ``connections.max.reauth.ms``, or less when
  the credential (an OAUTHBEARER token) expires sooner; 0 when neither limits the session. The
  client must re-authenticate (SaslHandshake + SaslAuthenticate on the same connection, the same
  principal) before then; after it, any other request closes the connection.
- v2: flexible versions (compact strings and arrays, tagged fields).
"""

from __future__ import annotations

import datetime
import logging

from kio.schema.errors import ErrorCode

from ..notices import notice
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
        _count(ctx, session, ok=False)
        # Rate limited per client address (oncelog.notices): a password-guessing flood writes one
        # line a minute per address, with the count of those suppressed.
        notice(log, "SASL %s authentication failed from %s: %s", session.mechanism_name, ctx.peer,
               exc.detail or exc, level=logging.WARNING, key=_failure_key(ctx, session))
        return build(m.SaslAuthenticateResponse, error_code=ErrorCode.sasl_authentication_failed,
                     error_message=str(exc), auth_bytes=b"", session_lifetime=NO_LIFETIME)
    if not done:
        return build(m.SaslAuthenticateResponse, error_code=OK, error_message=None, auth_bytes=answer,
                     session_lifetime=NO_LIFETIME)
    now_ms = ctx.broker.clock()
    refused, lifetime_ms = session.authenticated(ctx.broker.config.connections_max_reauth_ms, now_ms)
    _count(ctx, session, ok=not refused)
    if refused:
        notice(log, "SASL re-authentication refused from %s: %s", ctx.peer, refused, level=logging.WARNING,
               key=_failure_key(ctx, session))
        return build(m.SaslAuthenticateResponse, error_code=ErrorCode.sasl_authentication_failed,
                     error_message=refused, auth_bytes=b"", session_lifetime=NO_LIFETIME)
    log.info("%s %s with SASL %s from %s", session.principal,
             "re-authenticated" if session.reauthenticating else "authenticated", session.mechanism_name, ctx.peer)
    return build(m.SaslAuthenticateResponse, error_code=OK, error_message=None, auth_bytes=answer,
                 session_lifetime=datetime.timedelta(milliseconds=lifetime_ms))


def _failure_key(ctx, session) -> tuple:
    """One log line a minute per client address and mechanism."""
    return ("sasl-failure", ctx.peer.rpartition(":")[0], session.mechanism_name)


def _count(ctx, session, ok: bool) -> None:
    """Kafka's successful-/failed-authentication-total of the listener (oncelog.metrics)."""
    metrics = ctx.broker.metrics
    if metrics is not None:
        metrics.authenticated(session.listener, ok)
