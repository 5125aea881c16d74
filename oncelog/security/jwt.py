"""Signed OAUTHBEARER tokens as Kafka's broker validates them (KIP-768: the
OAuthBearerValidatorCallbackHandler with its default ValidatorAccessTokenValidator over jose4j):
a JWS in compact form, its signature checked against a key of a JWKS (JSON Web Key Set), then its
claims. Sans-IO apart from reading the JWKS file once, when built (as Kafka's
JwksFileVerificationKeyResolver reads it once at configure); the clock is passed in.

Configured by Kafka's broker configs (per listener ``listener.name.<l>.oauthbearer.<name>`` over
the broker-wide ``<name>``):

- ``sasl.oauthbearer.jwks.endpoint.url``: a ``file:`` URL of a JWKS JSON file. An ``http(s)``
  URL is refused: oncelog fetches nothing over the network (Kafka would poll it every
  ``sasl.oauthbearer.jwks.endpoint.refresh.ms``).
- ``sasl.oauthbearer.expected.audience`` (list), ``sasl.oauthbearer.expected.issuer``,
  ``sasl.oauthbearer.sub.claim.name`` (``sub``), ``sasl.oauthbearer.scope.claim.name``
  (``scope``), ``sasl.oauthbearer.clock.skew.seconds`` (30).

Validation, in order (each failure an :class:`InvalidToken` whose message is for the broker's log
only; the client is told ``{"status":"invalid_token"}``):

Step 1. Three base64url parts (:func:`b64url_json`: the URL-safe alphabet without padding; UTF-8
        JSON objects, member names unique at every depth); the header's ``alg`` a string, one of
        RS256/384/512, PS256/384/512, ES256/384 (``none`` and HMAC refused: jose4j's
        DISALLOW_NONE, and a broker has no shared secret); ``kid``, ``typ`` and ``cty``, when
        present, strings; no ``crit`` header.
Step 2. The key: the JWKS keys whose ``kid`` equals the header's (when it has one), whose ``kty``
        fits the algorithm, whose ``use`` (if any) is ``sig``, whose ``alg`` (if any) is the
        header's, and for EC whose curve is the algorithm's; the first such key. None: refused.
Step 3. The signature over ``header.payload``: RSASSA-PKCS1-v1_5 / RSASSA-PSS / ECDSA (raw
        ``r||s``, RFC 7518 §3.4) with ``cryptography``.
Step 4. The claims (jose4j's checks, ``skew`` = clock.skew.seconds). Numeric dates (``exp``,
        ``iat``, ``nbf``: :func:`number_claim`) are finite JSON numbers, not booleans, whose
        milliseconds fit a signed 64-bit integer. ``exp`` required, non-negative (Kafka) and
        ``now < exp + skew``; ``iat`` required and non-negative; ``nbf`` if present
        ``now + skew >= nbf``; ``aud`` if present a string or a list of strings, and with an
        expected audience it must hold one of them; without one, a token that has ``aud`` is
        refused (jose4j's default audience check, which Kafka keeps); ``iss``, ``sub`` and ``jti``
        if present strings (jose4j reads them whether or not a value is expected), and with an
        expected issuer ``iss`` must equal it; the subject claim a non-blank string; the scope
        claim a string (one scope, as Kafka) or a list of strings, each non-blank and none twice
        (Kafka's ClaimValidationUtils), any other type no scope.
        Difference from Kafka: an ``iat`` more than ``skew`` in the future is refused (jose4j
        only requires it to be present); a string holding a lone UTF-16 surrogate is refused
        (Java strings hold one; it cannot be written as UTF-8, so it could be no principal).

Every way a token can be wrong ends in :class:`InvalidToken`, nothing else: it is parsed before
anyone is authenticated, and any other exception would reach the connection's dispatcher.

The result is (principal name, ``exp`` in ms): the principal is ``User:<sub>``, and KIP-368's
session lifetime ends at ``exp``.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import unquote, urlparse

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

JWKS_ENDPOINT_URL = "sasl.oauthbearer.jwks.endpoint.url"
EXPECTED_AUDIENCE = "sasl.oauthbearer.expected.audience"
EXPECTED_ISSUER = "sasl.oauthbearer.expected.issuer"
SUB_CLAIM_NAME = "sasl.oauthbearer.sub.claim.name"
SCOPE_CLAIM_NAME = "sasl.oauthbearer.scope.claim.name"
CLOCK_SKEW_SECONDS = "sasl.oauthbearer.clock.skew.seconds"
VALIDATOR_CONFIGS = (JWKS_ENDPOINT_URL, EXPECTED_AUDIENCE, EXPECTED_ISSUER, SUB_CLAIM_NAME, SCOPE_CLAIM_NAME,
                     CLOCK_SKEW_SECONDS)


class InvalidToken(ValueError):
    """The token failed validation (the reason goes to the broker's log only)."""


class JwksConfigError(ValueError):
    """The JWKS URL or file cannot be used (the broker does not start / the listener offers no
    OAUTHBEARER)."""


# jose4j keeps a NumericDate's seconds in a long, and Kafka a time's milliseconds: the last second
# whose milliseconds fit (either sign) bounds every numeric date a token may carry.
MAX_NUMERIC_DATE = (2 ** 63 - 1) // 1000
_LONG_MAX = 2 ** 63 - 1
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")


def shown(value: Any, limit: int = 60) -> str:
    """A claim's value for a log line: its repr (newlines escaped), cut to ``limit`` characters,
    since the value is whatever a client sent."""
    try:
        text = repr(value)
    except ValueError:  # an int too long to print
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def b64url_decode(part: str) -> bytes:
    """The bytes of one part of a compact JWS: RFC 7515's base64url, the URL-safe alphabet without
    padding. Anything else is :class:`InvalidToken` — Python's decoder would skip characters
    outside the alphabet and read bytes the sender never wrote."""
    if not _BASE64URL.fullmatch(part) or len(part) % 4 == 1:
        raise InvalidToken(f"not base64url (RFC 7515: A-Z a-z 0-9 - _ without padding): {shown(part, 40)}")
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError) as exc:
        raise InvalidToken(f"not base64url: {exc}") from None


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose member names are unique, as jose4j's JsonUtil requires: with a name
    twice, one reader takes the first value and another the last."""
    obj: dict[str, Any] = {}
    for name, value in pairs:
        if name in obj:
            raise ValueError(f"An entry for {shown(name)} already exists. Names must be unique.")
        obj[name] = value
    return obj


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (RFC 8259 has no NaN or Infinity)")


def strict_json(data: bytes) -> Any:
    """The JSON value of a token's part, read as jose4j reads it: UTF-8 only, no ``NaN`` /
    ``Infinity`` literals, unique member names at every depth. Also refused: nesting deeper than
    the interpreter's recursion limit, integers of more than 4300 digits (Python's limit) and
    strings with a lone surrogate (see the module docstring). Raises :class:`InvalidToken`."""
    try:
        value = json.loads(data.decode("utf-8"), object_pairs_hook=_unique_members, parse_constant=_no_constant)
        # Walks every string and name: a lone surrogate cannot be encoded.
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except RecursionError:
        raise InvalidToken("JSON nested too deeply") from None
    except UnicodeEncodeError:
        raise InvalidToken("a JSON string holding a lone UTF-16 surrogate") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, the hooks' refusals
        raise InvalidToken(f"not base64url-encoded UTF-8 JSON: {exc}") from None
    return value


def b64url_json(part: str) -> dict:
    """A JOSE header or a claims set: a base64url part holding a JSON object (:func:`strict_json`).
    Raises :class:`InvalidToken`."""
    value = strict_json(b64url_decode(part))
    if not isinstance(value, dict):
        raise InvalidToken("a JOSE header or claims set that is not a JSON object")
    return value


def number_claim(claims: dict, name: str) -> int | float | None:
    """A NumericDate claim (``exp``, ``iat``, ``nbf``): None when absent or null (as jose4j);
    else a JSON number that is not a boolean, finite (``1e400`` reads as infinity) and within
    ``±MAX_NUMERIC_DATE`` seconds (jose4j refuses an integer beyond a long: "unreasonable for a
    NumericDate"). Raises :class:`InvalidToken`."""
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidToken(f"The {name} claim had the incorrect type: {type(value).__name__}")
    # An int is compared as an int: float(10**400) would raise OverflowError.
    if (isinstance(value, float) and not math.isfinite(value)) or not -MAX_NUMERIC_DATE <= value <= MAX_NUMERIC_DATE:
        raise InvalidToken(f"{shown(value)} is unreasonable for a NumericDate ({name})")
    return value


def millis(seconds: int | float) -> int:
    """A numeric date's milliseconds (a float's truncated), within a signed 64-bit integer."""
    ms = seconds * 1000 if isinstance(seconds, int) else int(seconds * 1000)
    return max(-_LONG_MAX - 1, min(ms, _LONG_MAX))  # a float at the bound may round past it


def optional_string(obj: dict, name: str, what: str = "claim") -> str | None:
    """A member that, when present and not null, must be a string (jose4j's
    getStringClaimValue / getStringHeaderValue). Raises :class:`InvalidToken`."""
    value = obj.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidToken(f"The value of the '{name}' {what} is not the expected type "
                           f"({type(value).__name__}: {shown(value)})")
    return value


# alg -> (kty, hash, scheme, EC curve name)
_ALGORITHMS: dict[str, tuple[str, type[hashes.HashAlgorithm], str, str | None]] = {
    "RS256": ("RSA", hashes.SHA256, "pkcs1", None), "RS384": ("RSA", hashes.SHA384, "pkcs1", None),
    "RS512": ("RSA", hashes.SHA512, "pkcs1", None),
    "PS256": ("RSA", hashes.SHA256, "pss", None), "PS384": ("RSA", hashes.SHA384, "pss", None),
    "PS512": ("RSA", hashes.SHA512, "pss", None),
    "ES256": ("EC", hashes.SHA256, "ecdsa", "P-256"), "ES384": ("EC", hashes.SHA384, "ecdsa", "P-384"),
}
_CURVES = {"P-256": (ec.SECP256R1, 32), "P-384": (ec.SECP384R1, 48)}


def _b64_int(jwk: Mapping[str, Any], name: str) -> int:
    value = jwk.get(name)
    if not isinstance(value, str):
        raise JwksConfigError(f"a JWK without its {name!r} member")
    try:
        # A JWKS is configuration, not a client's token: tolerate base64 padding there.
        return int.from_bytes(b64url_decode(value.rstrip("=")), "big")
    except InvalidToken as exc:
        raise JwksConfigError(f"JWK member {name!r}: {exc}") from None


@dataclass(frozen=True)
class VerificationKey:
    """One public key of the JWKS, as its JWK says it may be used."""

    kid: str | None
    kty: str
    use: str | None
    alg: str | None
    crv: str | None
    key: Any  # RSAPublicKey | EllipticCurvePublicKey

    @classmethod
    def from_jwk(cls, jwk: Mapping[str, Any]) -> "VerificationKey | None":
        """The key of a public RSA or EC (P-256/P-384) JWK; None for other key types (skipped, as
        no allowed algorithm could use them). Raises JwksConfigError for a malformed one."""
        kty = jwk.get("kty")
        if kty == "RSA":
            key: Any = rsa.RSAPublicNumbers(_b64_int(jwk, "e"), _b64_int(jwk, "n")).public_key()
            crv = None
        elif kty == "EC" and jwk.get("crv") in _CURVES:
            crv = jwk["crv"]
            try:
                key = ec.EllipticCurvePublicNumbers(_b64_int(jwk, "x"), _b64_int(jwk, "y"),
                                                    _CURVES[crv][0]()).public_key()
            except ValueError as exc:
                raise JwksConfigError(f"EC JWK {jwk.get('kid')!r}: {exc}") from None
        else:
            return None
        kid = jwk.get("kid")
        return cls(kid if isinstance(kid, str) else None, kty, jwk.get("use"), jwk.get("alg"), crv, key)

    def fits(self, alg: str, kid: str | None) -> bool:
        kty, _, _, crv = _ALGORITHMS[alg]
        return ((kid is None or self.kid == kid) and self.kty == kty and self.use in (None, "sig")
                and self.alg in (None, alg) and (crv is None or self.crv == crv))

    def verify(self, alg: str, signature: bytes, signing_input: bytes) -> bool:
        _, digest, scheme, crv = _ALGORITHMS[alg]
        try:
            if scheme == "ecdsa":
                size = _CURVES[crv][1]  # type: ignore[index]
                if len(signature) != 2 * size:
                    return False
                der = encode_dss_signature(int.from_bytes(signature[:size], "big"),
                                           int.from_bytes(signature[size:], "big"))
                self.key.verify(der, signing_input, ec.ECDSA(digest()))
            elif scheme == "pss":
                self.key.verify(signature, signing_input,
                                padding.PSS(padding.MGF1(digest()), digest().digest_size), digest())
            else:
                self.key.verify(signature, signing_input, padding.PKCS1v15(), digest())
        except InvalidSignature:
            return False
        return True


def parse_jwks(text: str, origin: str = "JWKS") -> tuple[VerificationKey, ...]:
    """The usable keys of a JWKS JSON document (``{"keys": [...]}``)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise JwksConfigError(f"{origin}: not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise JwksConfigError(f"{origin}: a JWKS is a JSON object with a \"keys\" array")
    keys = []
    for jwk in doc["keys"]:
        if not isinstance(jwk, dict):
            raise JwksConfigError(f"{origin}: a key that is not a JSON object")
        key = VerificationKey.from_jwk(jwk)
        if key is not None:
            keys.append(key)
    return tuple(keys)


def jwks_file(url: str) -> str:
    """The path of a ``file:`` JWKS URL, with Kafka's ConfigurationUtils checks (a file that
    exists, is readable and is not a directory); an ``http(s)`` URL is refused: no network."""
    parsed = urlparse(url.strip())
    scheme = parsed.scheme.lower()
    if not scheme:
        raise JwksConfigError(f"The OAuth configuration option {JWKS_ENDPOINT_URL} contains a URL ({url}) that is "
                              f"missing the protocol")
    if scheme in ("http", "https"):
        raise JwksConfigError(f"{JWKS_ENDPOINT_URL}={url}: oncelog does not fetch a JWKS over the network; give a "
                              f"file: URL of the JWKS JSON (e.g. file:///etc/oncelog/jwks.json), refreshed by a "
                              f"restart")
    if scheme != "file":
        raise JwksConfigError(f"The OAuth configuration option {JWKS_ENDPOINT_URL} contains a URL ({url}) that "
                              f"contains an invalid protocol ({scheme}); only \"http\", \"https\", and \"file\" "
                              f"protocol are supported")
    path = os.path.abspath(unquote(parsed.path or parsed.netloc))
    if not os.path.exists(path):
        raise JwksConfigError(f"The OAuth configuration option {JWKS_ENDPOINT_URL} contains a file ({path}) that "
                              f"doesn't exist")
    if os.path.isdir(path):
        raise JwksConfigError(f"The OAuth configuration option {JWKS_ENDPOINT_URL} references a directory "
                              f"({path}), not a file")
    if not os.access(path, os.R_OK):
        raise JwksConfigError(f"The OAuth configuration option {JWKS_ENDPOINT_URL} contains a file ({path}) that "
                              f"doesn't have read permission")
    return path


@dataclass(frozen=True)
class JwksValidator:
    """Kafka's broker-side validator of signed tokens (see the module docstring)."""

    keys: tuple[VerificationKey, ...]
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    sub_claim: str = "sub"
    scope_claim: str = "scope"
    clock_skew_seconds: int = 30

    @classmethod
    def from_configs(cls, configs: Mapping[str, str]) -> "JwksValidator":
        """From the ``sasl.oauthbearer.*`` settings in force (Kafka names, their text); reads the
        JWKS file now. Raises JwksConfigError."""
        url = configs.get(JWKS_ENDPOINT_URL)
        if not url:
            raise JwksConfigError(f"The OAuth configuration option {JWKS_ENDPOINT_URL} must be non-null")
        path = jwks_file(url)
        try:
            with open(path, encoding="utf-8") as f:
                keys = parse_jwks(f.read(), path)
        except OSError as exc:
            raise JwksConfigError(f"{JWKS_ENDPOINT_URL}: {path}: {exc.strerror or exc}") from None
        skew = (configs.get(CLOCK_SKEW_SECONDS) or "30").strip()
        return cls(keys=keys,
                   expected_audience=tuple(a.strip() for a in (configs.get(EXPECTED_AUDIENCE) or "").split(",")
                                           if a.strip()),
                   expected_issuer=(configs.get(EXPECTED_ISSUER) or "").strip() or None,
                   sub_claim=(configs.get(SUB_CLAIM_NAME) or "").strip() or "sub",
                   scope_claim=(configs.get(SCOPE_CLAIM_NAME) or "").strip() or "scope",
                   clock_skew_seconds=int(skew))

    def validate(self, token: str, now_ms: int) -> tuple[str, int]:
        """(principal name, expiry in ms) of a valid token; raises :class:`InvalidToken`."""
        # Step 1.
        parts = token.split(".")
        if len(parts) != 3:
            raise InvalidToken(f"a JWS in compact form has 3 dot-separated parts, not {len(parts)}")
        header, claims = b64url_json(parts[0]), b64url_json(parts[1])
        alg = header.get("alg")
        # isinstance first: a list or an object is unhashable (a dict lookup would raise TypeError).
        if not isinstance(alg, str) or alg not in _ALGORITHMS:
            raise InvalidToken(f"the JWS algorithm {shown(alg)} is not allowed (allowed: {', '.join(_ALGORITHMS)})")
        if "crit" in header:
            raise InvalidToken(f"unrecognized critical header parameter(s): {shown(header['crit'])}")
        for name in ("typ", "cty"):
            optional_string(header, name, "header")
        # Step 2.
        kid = optional_string(header, "kid", "header")
        key = next((k for k in self.keys if k.fits(alg, kid)), None)
        if key is None:
            raise InvalidToken(f"Unable to find a suitable verification key for JWS w/ header {{alg={alg}, "
                               f"kid={shown(kid)}}} from the JWKS")
        # Step 3.
        if not key.verify(alg, b64url_decode(parts[2]), f"{parts[0]}.{parts[1]}".encode("ascii")):
            raise InvalidToken(f"JWS signature is invalid (alg {alg}, kid {shown(kid)})")
        # Step 4.
        skew_ms = self.clock_skew_seconds * 1000
        exp = number_claim(claims, "exp")
        if exp is None:
            raise InvalidToken("No Expiration Time (exp) claim present")
        if exp < 0:
            raise InvalidToken(f"exp value must be non-negative; value given was \"{exp:.0f}\"")
        if now_ms >= exp * 1000 + skew_ms:
            raise InvalidToken(f"The JWT is no longer valid - the evaluation time {now_ms} ms is on or after the "
                               f"Expiration Time (exp={exp:.0f}) claim value (even when providing "
                               f"{self.clock_skew_seconds} seconds of leeway)")
        iat = number_claim(claims, "iat")
        if iat is None:
            raise InvalidToken("No Issued At (iat) claim present")
        if iat < 0:
            raise InvalidToken(f"iat value must be non-negative; value given was \"{iat:.0f}\"")
        if iat * 1000 > now_ms + skew_ms:
            raise InvalidToken(f"iat ({iat:.0f}) is in the future (now {now_ms} ms, leeway "
                               f"{self.clock_skew_seconds} s)")
        nbf = number_claim(claims, "nbf")
        if nbf is not None and now_ms + skew_ms < nbf * 1000:
            raise InvalidToken(f"The JWT is not yet valid as the evaluation time {now_ms} ms is before the Not "
                               f"Before (nbf={nbf:.0f}) claim time")
        self._check_audience(claims)
        iss = optional_string(claims, "iss")
        if self.expected_issuer is not None and iss != self.expected_issuer:
            raise InvalidToken(f"Issuer (iss) claim value ({shown(iss)}) doesn't match expected value of "
                               f"{self.expected_issuer}")
        for name in ("sub", "jti"):
            optional_string(claims, name)
        sub = claims.get(self.sub_claim)
        if not isinstance(sub, str) or not sub.strip():
            raise InvalidToken(f"{self.sub_claim} value must be a non-empty string" if sub is None or
                               isinstance(sub, str) else f"Could not extract the '{self.sub_claim}' claim from the "
                                                         f"access token")
        self._check_scope(claims)
        return sub.strip(), millis(exp)

    def _check_scope(self, claims: dict) -> None:
        """Kafka's ValidatorAccessTokenValidator: a string is one scope, a list is the scopes, any
        other type is none; then ClaimValidationUtils.validateScopes: each a non-blank string,
        none twice."""
        scope = claims.get(self.scope_claim)
        scopes = [scope] if isinstance(scope, str) else scope if isinstance(scope, list) else []
        seen: set[str] = set()
        for s in scopes:
            if not isinstance(s, str) or not s.strip():
                raise InvalidToken(f"{self.scope_claim} value must be non-empty strings (not {shown(s)})")
            if s.strip() in seen:
                raise InvalidToken(f"{self.scope_claim} value must not contain duplicates - {shown(s.strip())} "
                                   f"already present")
            seen.add(s.strip())

    def _check_audience(self, claims: dict) -> None:
        aud = claims.get("aud")
        if aud is None:
            if self.expected_audience:
                raise InvalidToken("No Audience (aud) claim present.")
            return
        audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else None
        if audiences is None or not all(isinstance(a, str) for a in audiences):
            raise InvalidToken("The value of the 'aud' claim is not a string or an array of strings")
        if not any(a in self.expected_audience for a in audiences):
            why = ("doesn't contain an acceptable identifier" if self.expected_audience
                   else "present in the JWT but no expected audience value(s) were provided "
                        f"({EXPECTED_AUDIENCE})")
            raise InvalidToken(f"Audience (aud) claim {shown(audiences)} {why}. Expected "
                               f"{list(self.expected_audience)} as an aud value.")
