"""SASL server mechanisms, sans-IO: bytes from the client in, bytes to the client out.

One interface for every mechanism, so the connection code (SaslHandshake / SaslAuthenticate in
the server) drives them alike::

    mechanism = mechanisms.start("SCRAM-SHA-256")       # UnsupportedSaslMechanism if not enabled
    server_bytes, done = mechanism.step(client_bytes)   # SaslAuthenticationFailed on failure
    ...                                                 # until done
    mechanism.principal                                 # "User:<name>"

No sockets, no clock but the injected one, nothing logged that a client sent. A failure raises
:class:`SaslAuthenticationFailed` whose message is what Kafka's SaslServerAuthenticator sends
the client in SaslAuthenticate's ``error_message`` (Kafka's SaslAuthenticationException
messages verbatim; for failures Kafka raises as a plain SaslException — unknown user, wrong
proof — the generic "Authentication failed during authentication due to invalid credentials
with SASL mechanism <M>", so a client cannot tell an unknown user from a wrong password);
``detail`` holds the real reason for the broker's log. After a failure or completion a
mechanism accepts nothing more.

Mechanisms:

- PLAIN (RFC 4616, Kafka's PlainSaslServer + PlainServerCallbackHandler): ``authzid NUL authcid
  NUL passwd``; the users are the ``user_<name>="<password>"`` options of the PlainLoginModule
  entry of the listener's JAAS config; passwords compared in constant time; an authzid must be
  empty or equal to the user name.
- SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802 through ``scramp``'s ScramServer, Kafka's
  ScramSaslServer) against :class:`~oncelog.security.scram.ScramCredentialStore`:
  client-first -> server-first (salt, iterations, nonce), client-final -> server-final (the
  verifier ``v=``). Differences from Kafka, all refusals with the generic message: an authzid
  (``n,a=<user>,``; no Kafka client sends one) and client-first extensions (``tokenauth=true``:
  delegation tokens, which oncelog does not have).
- OAUTHBEARER (RFC 7628, Kafka's OAuthBearerSaslServer with the unsecured validator,
  OAuthBearerUnsecuredValidatorCallbackHandler): the client's ``n,,\\x01auth=Bearer
  <token>\\x01\\x01``; the token an unsecured JWS (``alg`` ``none``, empty signature) whose
  principal claim (``sub`` unless ``unsecuredValidatorPrincipalClaimName``) names the user,
  ``exp`` required and in the future, ``iat`` if present not in the future (both with
  ``unsecuredValidatorAllowableClockSkewMs``), ``unsecuredValidatorRequiredScope`` checked. An
  invalid token is answered, as RFC 7628 says, with ``{"status":"invalid_token"}`` and not done;
  the client's ``\\x01`` then fails the exchange with that JSON as the message.
  ``session_expiry_ms`` is the token's ``exp`` (for KIP-368's session lifetime). With
  ``sasl.oauthbearer.jwks.endpoint.url`` configured, the token must instead be a JWS signed with
  a key of that JWKS, validated as Kafka's OAuthBearerValidatorCallbackHandler does
  (:class:`~oncelog.security.jwt.JwksValidator`; alg ``none`` refused). Either validator raises
  :class:`~oncelog.security.jwt.InvalidToken` and nothing else for any token (JSON of any shape,
  numbers beyond range, bytes that are not UTF-8 or base64url), so a malformed token is answered
  as an invalid one.
"""

from __future__ import annotations

import hmac
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol

from .jaas import JaasConfigError, login_module_matches, parse_jaas_entries
from .jwt import InvalidToken, b64url_json, millis, number_claim, optional_string, shown
from .scram import ScramCredentialStore, auth_info

PLAIN = "PLAIN"
SCRAM_SHA_256, SCRAM_SHA_512 = "SCRAM-SHA-256", "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
JAAS_USER_PREFIX = "user_"  # Kafka's PlainServerCallbackHandler.JAAS_USER_PREFIX


class SaslAuthenticationFailed(Exception):
    """Authentication failed. ``str(exc)`` is the message for the client (SaslAuthenticate's
    error_message with SASL_AUTHENTICATION_FAILED); ``detail`` the reason for the broker's log
    (may name the user; never a password)."""

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail or message


class UnsupportedSaslMechanism(ValueError):
    """The mechanism is not enabled (SaslHandshake answers UNSUPPORTED_SASL_MECHANISM with the
    enabled list)."""


class ServerMechanism(Protocol):
    mechanism_name: str
    complete: bool
    principal: str | None  # "User:<name>" once complete
    session_expiry_ms: int | None  # when the credential expires (OAUTHBEARER), else None

    def step(self, client_bytes: bytes) -> tuple[bytes, bool]: ...


def _principal(user: str) -> str:
    return "User:" + user


def generic_failure(mechanism: str, reauthentication: bool = False) -> str:
    """Kafka's SaslServerAuthenticator message for a SaslException (no detail for the client)."""
    what = "re-authentication" if reauthentication else "authentication"
    return f"Authentication failed during {what} due to invalid credentials with SASL mechanism {mechanism}"


class _Base:
    mechanism_name = ""

    def __init__(self, reauthentication: bool = False) -> None:
        self.complete = False
        self.failed = False
        self.principal: str | None = None
        self.session_expiry_ms: int | None = None
        self._reauthentication = reauthentication

    def _fail(self, message: str | None = None, detail: str | None = None) -> SaslAuthenticationFailed:
        self.failed = True
        return SaslAuthenticationFailed(message or generic_failure(self.mechanism_name, self._reauthentication),
                                        detail)

    def _check_open(self) -> None:
        if self.complete or self.failed:
            raise self._fail(detail=f"unexpected SASL message after the {self.mechanism_name} exchange "
                                    f"{'completed' if self.complete else 'failed'}")

    def _done(self, user: str) -> None:
        self.complete = True
        self.principal = _principal(user)


# ---------------------------------------------------------------------------------- PLAIN


def plain_users_from_jaas(text: str) -> dict[str, str]:
    """The ``user_<name>="<password>"`` options of the PlainLoginModule entry of a JAAS config
    (``listener.name.<l>.plain.sasl.jaas.config``), as Kafka's PlainServerCallbackHandler reads
    them; other options (the broker's own ``username``/``password``) are not users. Raises
    :class:`~oncelog.security.jaas.JaasConfigError` if there is no PlainLoginModule entry."""
    entries = [e for e in parse_jaas_entries(text) if login_module_matches(e.login_module, PLAIN_LOGIN_MODULE)]
    if not entries:
        raise JaasConfigError(f"no {PLAIN_LOGIN_MODULE} entry in the JAAS config")
    users: dict[str, str] = {}
    for entry in entries:
        for key, value in entry.options.items():
            if key.startswith(JAAS_USER_PREFIX) and key not in users:
                users[key[len(JAAS_USER_PREFIX):]] = value
    return users


class PlainServer(_Base):
    """Kafka's PlainSaslServer: one message, an empty answer."""

    mechanism_name = PLAIN

    def __init__(self, users: Mapping[str, str], reauthentication: bool = False) -> None:
        super().__init__(reauthentication)
        self._users = users

    def step(self, client_bytes: bytes) -> tuple[bytes, bool]:
        self._check_open()
        # Kafka's extractTokens: split on NUL into at most 4 pieces; exactly 3 are required.
        text = bytes(client_bytes).decode("utf-8", errors="replace")
        tokens = text.split("\x00", 3)
        if len(tokens) != 3:
            raise self._fail(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, user, password = tokens
        if not user:
            raise self._fail("Authentication failed: username not specified")
        if not password:
            raise self._fail("Authentication failed: password not specified")
        expected = self._users.get(user)
        # Constant time in the password (Kafka's Utils.isEqualConstantTime); an unknown user
        # is compared against the given password itself so timing does not reveal it.
        ok = hmac.compare_digest((expected if expected is not None else password).encode(), password.encode())
        if expected is None or not ok:
            raise self._fail("Authentication failed: Invalid username or password",
                             f"PLAIN: {'unknown user' if expected is None else 'wrong password for user'} {user!r}")
        if authzid and authzid != user:
            raise self._fail("Authentication failed: Client requested an authorization id that is different "
                             "from username")
        self._done(user)
        return b"", True


# ---------------------------------------------------------------------------------- SCRAM


class ScramServer(_Base):
    """Kafka's ScramSaslServer on scramp's ScramServer.

    Step 1. client-first (``n,,n=<user>,r=<client nonce>``): look the credential up; unknown
            user or malformed message fails (generic message); answer server-first
            (``r=<client nonce><server nonce>,s=<salt>,i=<iterations>``).
    Step 2. client-final (``c=biws,r=<nonce>,p=<proof>``): the nonce must be this exchange's
            and the proof must match the stored key; answer server-final (``v=<verifier>``),
            done.
    """

    def __init__(self, mechanism: str, credentials: ScramCredentialStore, reauthentication: bool = False) -> None:
        super().__init__(reauthentication)
        self.mechanism_name = mechanism
        self._user: str | None = None
        self._attempted_user: str | None = None

        def lookup(user: str):
            self._attempted_user = user
            credential = credentials.credential(user, mechanism)
            if credential is None:
                return None  # scramp: "Unknown user"
            self._user = user
            return auth_info(credential)

        # scramp is imported by the first SCRAM exchange: with asn1crypto and importlib.metadata it is
        # ~0.04 s of CPU, which every broker start (most of them without SCRAM) would pay.
        import scramp

        self._scram_error = scramp.ScramException
        self._server = scramp.ScramMechanism(mechanism).make_server(lookup)
        self._stage = 1

    def step(self, client_bytes: bytes) -> tuple[bytes, bool]:
        self._check_open()
        try:
            text = bytes(client_bytes).decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail(detail=f"{self.mechanism_name}: a message that is not UTF-8") from None
        try:
            if self._stage == 1:
                # Step 1.
                self._server.set_client_first(text)
                self._stage = 2
                return self._server.get_server_first().encode(), False
            # Step 2.
            self._server.set_client_final(text)
            server_final = self._server.get_server_final()
        except self._scram_error as exc:
            who = f" (user {self._attempted_user!r})" if self._attempted_user is not None else ""
            raise self._fail(detail=f"{self.mechanism_name} step {self._stage}{who}: {exc}") from None
        assert self._user is not None
        self._done(self._user)
        return server_final.encode(), True


# ---------------------------------------------------------------------------------- OAUTHBEARER


class TokenValidator(Protocol):
    """What OAUTHBEARER checks a token with: :class:`UnsecuredJwsValidator` (Kafka's default), or
    :class:`~oncelog.security.jwt.JwksValidator` when ``sasl.oauthbearer.jwks.endpoint.url`` is
    configured."""

    def validate(self, token: str, now_ms: int) -> tuple[str, int]: ...


@dataclass(frozen=True)
class UnsecuredJwsValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler, configured from the JAAS options
    of the OAuthBearerLoginModule entry (``unsecuredValidator*``)."""

    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    allowable_clock_skew_ms: int = 0

    @classmethod
    def from_jaas_options(cls, options: Mapping[str, str]) -> "UnsecuredJwsValidator":
        skew = (options.get("unsecuredValidatorAllowableClockSkewMs") or "").strip()
        skew_ms = int(skew) if skew else 0
        if skew_ms < 0:
            raise ValueError(f"Allowable clock skew millis must not be negative: {skew}")
        return cls(principal_claim=(options.get("unsecuredValidatorPrincipalClaimName") or "").strip() or "sub",
                   scope_claim=(options.get("unsecuredValidatorScopeClaimName") or "").strip() or "scope",
                   required_scope=tuple((options.get("unsecuredValidatorRequiredScope") or "").split()),
                   allowable_clock_skew_ms=skew_ms)

    @classmethod
    def from_jaas(cls, text: str) -> "UnsecuredJwsValidator":
        for entry in parse_jaas_entries(text):
            if login_module_matches(entry.login_module, OAUTHBEARER_LOGIN_MODULE):
                return cls.from_jaas_options(entry.options)
        raise JaasConfigError(f"no {OAUTHBEARER_LOGIN_MODULE} entry in the JAAS config")

    def validate(self, token: str, now_ms: int) -> tuple[str, int]:
        """(principal name, expiry in ms) of a valid token; raises :class:`InvalidToken` and
        nothing else, whatever the token holds (it is read before anyone is authenticated).

        Kafka's OAuthBearerUnsecuredJws and the handler's checks: three parts, base64url JSON
        objects (:func:`~oncelog.security.jwt.b64url_json`: strict base64url, UTF-8, unique
        member names), an empty signature, ``alg`` the string ``none``; the principal claim a
        non-blank string; ``exp`` required, ``iat`` optional, both numeric dates
        (:func:`~oncelog.security.jwt.number_claim`: finite, in range); ``exp`` after now and
        after ``iat``, ``iat`` not after now (with the skew); the scope claim a string or a list
        of strings. Beyond Kafka's checks (types only, so that every claim is what a reader
        expects): header ``kid``/``typ`` strings if present, ``nbf`` a numeric date if present
        (its time is not enforced, as Kafka), a list scope's elements strings (Kafka turns any
        element into text)."""
        parts = token.split(".")
        if len(parts) != 3:
            raise InvalidToken(f"an unsecured JWS has 3 dot-separated parts, not {len(parts)}")
        header, claims = b64url_json(parts[0]), b64url_json(parts[1])
        if parts[2]:
            raise InvalidToken("an unsecured JWS must have an empty signature")
        if header.get("alg") != "none":
            raise InvalidToken(f"unsecured JWS: alg must be 'none', not {shown(header.get('alg'))}")
        for name in ("kid", "typ"):
            optional_string(header, name, "header")
        principal = claims.get(self.principal_claim)
        if principal is None:
            raise InvalidToken(f"Required claim missing: {self.principal_claim}")
        if not isinstance(principal, str) or not principal.strip():
            raise InvalidToken(f"The {self.principal_claim} claim had the incorrect type or is blank")
        skew = self.allowable_clock_skew_ms
        iat = number_claim(claims, "iat")
        if iat is not None and iat * 1000 > now_ms + skew:
            raise InvalidToken(f"The Issued At value ({iat * 1000:.0f} ms) is in the future")
        exp = number_claim(claims, "exp")
        if exp is None:
            raise InvalidToken("Required claim missing: exp")
        if now_ms >= exp * 1000 + skew:
            raise InvalidToken(f"The indicated time ({now_ms} ms) is on or after the Expiration Time value "
                               f"({exp * 1000:.0f} ms)")
        if iat is not None and exp <= iat:
            raise InvalidToken("The Expiration Time is not after the Issued At time")
        number_claim(claims, "nbf")
        scope = claims.get(self.scope_claim)
        if scope is not None and not isinstance(scope, str) and not (
                isinstance(scope, list) and all(isinstance(s, str) for s in scope)):
            # Kafka: "The 'scope' claim was not of type List"; a list's elements must be strings
            # here (a set of them is taken below: a list or an object element is unhashable).
            raise InvalidToken(f"The '{self.scope_claim}' claim is not a string or a list of strings: "
                               f"{shown(scope)}")
        if self.required_scope:
            granted = set(scope.split() if isinstance(scope, str) else scope or ())
            missing = [s for s in self.required_scope if s not in granted]
            if missing:
                raise InvalidToken(f"The provided scope ({shown(sorted(granted))}) was missing a required scope "
                                   f"({missing[0]})")
        return principal, millis(exp)


INVALID_TOKEN_RESPONSE = '{"status":"invalid_token"}'
# The longest session a token's exp gives (~31,700 years): far beyond any real token, and within
# what SaslAuthenticate's session_lifetime_ms can carry (a timedelta, an int64).
MAX_SESSION_LIFETIME_MS = 10 ** 15


class OAuthBearerServer(_Base):
    """Kafka's OAuthBearerSaslServer with its validator (unsecured JWS, or signed against a JWKS).

    Step 1. The client's initial response ``n,[a=<authzid>],\\x01auth=Bearer <token>\\x01
            [key=value\\x01...]\\x01``: a malformed one fails; an invalid token is answered
            ``{"status":"invalid_token"}`` (not done); a valid one completes with an empty
            answer (an authzid must equal the principal).
    Step 2. (only after an invalid token) the client's ``\\x01`` fails the exchange with that
            JSON as the message; anything else starts over at step 1, as Kafka does.
    """

    mechanism_name = OAUTHBEARER

    def __init__(self, validator: TokenValidator, clock: Callable[[], int],
                 reauthentication: bool = False) -> None:
        super().__init__(reauthentication)
        self._validator = validator
        self._clock = clock
        self._error: str | None = None
        self._invalid_reason: str | None = None
        self.extensions: dict[str, str] = {}

    def step(self, client_bytes: bytes) -> tuple[bytes, bool]:
        self._check_open()
        data = bytes(client_bytes)
        if data == b"\x01" and self._error is not None:
            # Step 2.
            raise self._fail(self._error, f"OAUTHBEARER: invalid token: {self._invalid_reason}")
        self._error = None
        # Step 1.
        authzid, token, extensions = self._parse(data)
        try:
            principal, expiry_ms = self._validator.validate(token, self._clock())
        except InvalidToken as exc:
            self._error = INVALID_TOKEN_RESPONSE
            self._invalid_reason = str(exc)
            return INVALID_TOKEN_RESPONSE.encode(), False
        if authzid and authzid != principal:
            raise self._fail(f"Authentication failed: Client requested an authorization id ({authzid}) that is "
                             f"different from the token's principal name ({principal})")
        self.extensions = extensions
        # A token may be valid for ~292 million years (the NumericDate range); the session
        # lifetime SaslAuthenticate answers is a timedelta, which ends at 999,999,999 days.
        self.session_expiry_ms = min(expiry_ms, self._clock() + MAX_SESSION_LIFETIME_MS)
        self._done(principal)
        return b"", True

    def _parse(self, data: bytes) -> tuple[str, str, dict[str, str]]:
        """Kafka's OAuthBearerClientInitialResponse."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail(detail="OAUTHBEARER: an initial response that is not UTF-8") from None
        if not text.startswith("n,") or "," not in text[2:]:
            raise self._fail(detail="OAUTHBEARER: invalid OAUTHBEARER client first message (GS2 header)")
        gs2_authz, _, rest = text[2:].partition(",")
        if gs2_authz and not gs2_authz.startswith("a="):
            raise self._fail(detail="OAUTHBEARER: invalid GS2 authzid")
        authzid = gs2_authz[2:]
        if not (rest.startswith("\x01") and rest.endswith("\x01\x01")):
            raise self._fail(detail="OAUTHBEARER: invalid OAUTHBEARER client first message (key/value pairs)")
        pairs: dict[str, str] = {}
        for kv in rest[1:-2].split("\x01"):
            key, eq, value = kv.partition("=")
            if not eq or not key:
                raise self._fail(detail="OAUTHBEARER: a key/value pair without '='")
            pairs[key] = value
        auth = pairs.pop("auth", None)
        scheme, _, token = (auth or "").partition(" ")
        token = token.strip(" ")
        if scheme.lower() != "bearer" or not token:
            raise self._fail(detail="OAUTHBEARER: no 'auth=Bearer <token>' in the client first message")
        return authzid, token, pairs


# ---------------------------------------------------------------------------------- the factory


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class SaslServerMechanisms:
    """The mechanisms one listener offers (``sasl.enabled.mechanisms``), each with what it
    checks credentials against: PLAIN's users, the SCRAM credential store, the OAUTHBEARER
    validator. A mechanism is offered only when enabled and configured."""

    enabled: tuple[str, ...] = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)
    plain_users: Mapping[str, str] | None = None
    scram_credentials: ScramCredentialStore | None = None
    oauthbearer: TokenValidator | None = None
    clock: Callable[[], int] = field(default=_wall_clock_ms)

    @property
    def enabled_mechanisms(self) -> tuple[str, ...]:
        """What SaslHandshake lists: enabled and configured, in ``enabled`` order."""
        configured = {PLAIN: self.plain_users is not None, SCRAM_SHA_256: self.scram_credentials is not None,
                      SCRAM_SHA_512: self.scram_credentials is not None, OAUTHBEARER: self.oauthbearer is not None}
        return tuple(m for m in self.enabled if configured.get(m, False))

    def start(self, mechanism: str, *, reauthentication: bool = False) -> ServerMechanism:
        """A fresh server side of one exchange (the mechanism name is case-sensitive, as in
        Kafka's SaslHandshake)."""
        if mechanism not in self.enabled_mechanisms:
            raise UnsupportedSaslMechanism(f"Unsupported SASL mechanism {mechanism}")
        if mechanism == PLAIN:
            return PlainServer(self.plain_users or {}, reauthentication)
        if mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
            assert self.scram_credentials is not None
            return ScramServer(mechanism, self.scram_credentials, reauthentication)
        assert self.oauthbearer is not None
        return OAuthBearerServer(self.oauthbearer, self.clock, reauthentication)
