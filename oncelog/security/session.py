"""One connection's security state: its listener, its principal, and where it is in SASL.

A state machine per connection (the server owns one per socket; the SaslHandshake and
SaslAuthenticate handlers move it)::

    PLAINTEXT / SSL listener:      AUTHENTICATED from the start (User:ANONYMOUS, or the TLS
                                   client certificate's DN)
    SASL_PLAINTEXT / SASL_SSL:     HANDSHAKE --SaslHandshake(mechanism offered)--> AUTHENTICATE
                                   AUTHENTICATE --SaslAuthenticate(done)--> AUTHENTICATED (until expires_at_ms
                                   when connections.max.reauth.ms > 0)
                                   AUTHENTICATED --SaslHandshake(same mechanism)--> AUTHENTICATE
                                   (KIP-368 re-authentication: the principal may not change)
                                   any --failure--> FAILED (the answer is sent, then the
                                   connection is closed)

What a request gets in each state is :meth:`Session.admit`'s :class:`Verdict`, Kafka 4.4's
(SaslServerAuthenticator, KafkaChannel, SocketServer, KafkaApis; tests/e2e/test_session_attack_matrix.py
holds the broker to it for every API):

* HANDSHAKE: one ApiVersions (a second closes the connection) and SaslHandshake are served;
  anything else, SaslAuthenticate too, closes the connection without an answer.
* AUTHENTICATE (SaslAuthenticate framing; raw tokens never get here): SaslAuthenticate is served,
  SaslHandshake too (its handler answers ILLEGAL_SASL_STATE and fails the session); ApiVersions is
  answered ILLEGAL_SASL_STATE, then the connection closed; anything else closes it (Kafka answers
  the request's own error response first).
* AUTHENTICATED: everything is served, on a SASL listener with two exceptions (KafkaApis):
  SaslAuthenticate is answered ILLEGAL_SASL_STATE and the connection stays open, and SaslHandshake
  begins a re-authentication only when the session has a lifetime and none began in the last
  second (KafkaChannel.maybeBeginServerReauthentication), else it is answered ILLEGAL_SASL_STATE.
* Past the session's lifetime (KIP-368) only a re-authentication's SaslHandshake is served;
  anything else, ApiVersions too, closes the connection without an answer.

Both ways in — SaslAuthenticate (handshake v1) and the raw tokens after handshake v0 — end in
:meth:`Session.authenticated`, so the rules hold on both as in Kafka (which checks them on its
legacy branch too): a re-authentication keeps its principal, and the session's lifetime is
``connections.max.reauth.ms`` shortened to the credential's expiry.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

ANONYMOUS = "User:ANONYMOUS"
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
SASL_APIS = frozenset({SASL_HANDSHAKE, SASL_AUTHENTICATE})
# KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS: re-authentications begin at most this often.
MIN_REAUTH_INTERVAL_MS = 1000


class Verdict(enum.Enum):
    """What the connection does with a request (:meth:`Session.admit`)."""

    SERVE = "served"
    CLOSE = "closed without an answer"
    ILLEGAL_STATE = "answered ILLEGAL_SASL_STATE"  # the connection stays open
    ILLEGAL_STATE_CLOSE = "answered ILLEGAL_SASL_STATE, then closed"


class SaslState(enum.Enum):
    HANDSHAKE = "waiting for SaslHandshake"
    AUTHENTICATE = "exchanging SaslAuthenticate tokens"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


@dataclass
class Session:
    listener: str = "PLAINTEXT"
    sasl: bool = False  # a SASL_PLAINTEXT / SASL_SSL listener
    principal: str = ANONYMOUS
    state: SaslState = SaslState.AUTHENTICATED
    mechanism: object | None = field(default=None, repr=False)  # the exchange in progress
    mechanism_name: str | None = None
    expires_at_ms: int | None = None  # KIP-368: when the session ends (None: never)
    reauthenticating: bool = False
    # SaslHandshake v0 (Kafka 0.10's framing): the tokens that follow are raw size-prefixed
    # frames, not SaslAuthenticate requests.
    raw_tokens: bool = False
    api_versions_answered: bool = False  # HANDSHAKE: Kafka answers one ApiVersions, then wants SaslHandshake
    reauth_started_ms: int | None = None  # when the last re-authentication began
    # A re-authentication's SaslHandshake named another (enabled) mechanism: Kafka answers the
    # handshake and fails the exchange at its first token, closing without an answer
    # (SaslServerAuthenticator's REAUTH_BAD_MECHANISM).
    reauth_bad_mechanism: bool = False

    @classmethod
    def for_listener(cls, listener: str, security_protocol: str) -> "Session":
        sasl = security_protocol.startswith("SASL_")
        return cls(listener, sasl, ANONYMOUS, SaslState.HANDSHAKE if sasl else SaslState.AUTHENTICATED)

    @property
    def open(self) -> bool:
        """Authenticated with no session expiry: every request but SaslHandshake and
        SaslAuthenticate is served, no clock needed (the connection code's per-request fast
        path; those two go through :meth:`admit`)."""
        return self.state is SaslState.AUTHENTICATED and self.expires_at_ms is None

    def admit(self, api_key: int, now_ms: int) -> Verdict:
        """What a request of ``api_key`` gets now (the rules are in the module docstring).
        Admitting a re-authentication's SaslHandshake starts its one-second interval."""
        state = self.state
        if state is SaslState.AUTHENTICATED:
            if not self.sasl:
                return Verdict.SERVE  # the SASL handlers answer ILLEGAL_SASL_STATE themselves
            if api_key == SASL_HANDSHAKE:
                if self.expires_at_ms is not None and (self.reauth_started_ms is None
                                                       or now_ms - self.reauth_started_ms >= MIN_REAUTH_INTERVAL_MS):
                    self.reauth_started_ms = now_ms
                    return Verdict.SERVE
                return Verdict.CLOSE if self.expired(now_ms) else Verdict.ILLEGAL_STATE
            if self.expired(now_ms):
                return Verdict.CLOSE
            return Verdict.ILLEGAL_STATE if api_key == SASL_AUTHENTICATE else Verdict.SERVE
        if state is SaslState.HANDSHAKE:
            if api_key == SASL_HANDSHAKE or (api_key == API_VERSIONS and not self.api_versions_answered):
                return Verdict.SERVE
            return Verdict.CLOSE
        if state is SaslState.AUTHENTICATE:
            if self.reauth_bad_mechanism and api_key == SASL_AUTHENTICATE:
                return Verdict.CLOSE
            if api_key in SASL_APIS:
                return Verdict.SERVE
            return Verdict.ILLEGAL_STATE_CLOSE if api_key == API_VERSIONS else Verdict.CLOSE
        return Verdict.CLOSE  # FAILED

    def expired(self, now_ms: int) -> bool:
        return self.expires_at_ms is not None and now_ms >= self.expires_at_ms

    def authenticated(self, reauth_limit_ms: int, now_ms: int) -> tuple[str | None, int]:
        """The mechanism's exchange completed: move to AUTHENTICATED as its principal, with the
        session's lifetime (0: none). Returns (why it is refused, lifetime): a re-authentication
        that names another principal is refused (state FAILED, nothing else changes)."""
        principal = self.mechanism.principal
        if self.reauthenticating and principal != self.principal:
            self.state = SaslState.FAILED
            return f"Cannot change principals during re-authentication from {self.principal}: {principal}", 0
        lifetime_ms = session_lifetime_ms(reauth_limit_ms, self.mechanism, now_ms)
        self.principal = principal
        self.state = SaslState.AUTHENTICATED
        self.expires_at_ms = now_ms + lifetime_ms if lifetime_ms else None
        self.mechanism = None
        return None, lifetime_ms


def session_lifetime_ms(reauth_limit_ms: int, mechanism, now_ms: int) -> int:
    """KIP-368: connections.max.reauth.ms, shortened to the credential's expiry (an OAUTHBEARER
    token's ``exp``, ``mechanism.session_expiry_ms``); 0 = no re-authentication required. At
    least 1 ms when bounded: a credential already expired still ends the session at once."""
    expiry = getattr(mechanism, "session_expiry_ms", None)
    if not reauth_limit_ms and expiry is None:
        return 0
    remaining = [v for v in (reauth_limit_ms or None, (expiry - now_ms) if expiry is not None else None)
                 if v is not None]
    return max(min(remaining), 1)
