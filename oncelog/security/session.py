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

Before AUTHENTICATED a connection may send only ApiVersions, SaslHandshake and
SaslAuthenticate (Kafka's SaslServerAuthenticator); anything else closes it. After its session
expired, a connection may only re-authenticate; any other request closes it (KIP-368).

Both ways in — SaslAuthenticate (handshake v1) and the raw tokens after handshake v0 — end in
:meth:`Session.authenticated`, so the rules hold on both as in Kafka (which checks them on its
legacy branch too): a re-authentication keeps its principal, and the session's lifetime is
``connections.max.reauth.ms`` shortened to the credential's expiry.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

ANONYMOUS = "User:ANONYMOUS"
# ApiVersions, SaslHandshake, SaslAuthenticate: what a connection may send before authenticating.
PRE_AUTHENTICATION_APIS = frozenset({18, 17, 36})


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

    @classmethod
    def for_listener(cls, listener: str, security_protocol: str) -> "Session":
        sasl = security_protocol.startswith("SASL_")
        return cls(listener, sasl, ANONYMOUS, SaslState.HANDSHAKE if sasl else SaslState.AUTHENTICATED)

    @property
    def open(self) -> bool:
        """Authenticated with no session expiry: every request may be sent, no clock needed
        (the connection code's per-request fast path)."""
        return self.state is SaslState.AUTHENTICATED and self.expires_at_ms is None

    def may_send(self, api_key: int, now_ms: int) -> bool:
        if self.state is SaslState.AUTHENTICATED and not self.expired(now_ms):
            return True
        return self.state is not SaslState.FAILED and api_key in PRE_AUTHENTICATION_APIS

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
