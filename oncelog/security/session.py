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
