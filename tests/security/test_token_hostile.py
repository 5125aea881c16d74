"""Hostile OAUTHBEARER tokens: a token is read before anyone is authenticated,
so every malformed one — a header ``alg`` that is a list or an object, a numeric date of
``1e400``, ``NaN`` or ``10**400``, a claim of the wrong JSON type, duplicate member names,
non-UTF-8 or non-base64url parts, JSON nested too deeply — ends in the validators' one refusal,
:class:`~oncelog.security.jwt.InvalidToken`, for the unsecured validator and the signed (JWKS) one
alike. On the wire the broker answers it as any invalid token: ``{"status":"invalid_token"}``, then
SASL_AUTHENTICATION_FAILED (58) after the client's ``\\x01``, with a one-line reason in its log and
no traceback. A token valid to the far end of the NumericDate range authenticates (its session
lifetime fits the answer)."""

from __future__ import annotations

import base64
import json
import math

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from kio.schema.errors import ErrorCode

from oncelog.client.wire import RawClient, request_module
from oncelog.process import BrokerProcess
from oncelog.security.jwt import InvalidToken, JwksValidator
from oncelog.security.sasl import (
    INVALID_TOKEN_RESPONSE, OAuthBearerServer, SaslAuthenticationFailed, UnsecuredJwsValidator,
)
from tests.helpers import free_port

NOW_MS = 1_700_000_000_000
NOW = NOW_MS // 1000
EC_KEY = ec.generate_private_key(ec.SECP256R1())
# jose4j keeps a NumericDate's seconds in a long, Kafka a time's milliseconds: the last second
# whose milliseconds fit.
MAX_NUMERIC_DATE = (2 ** 63 - 1) // 1000
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def raw(obj) -> bytes:
    """JSON text as Python writes it: NaN and Infinity literals, ints of any size."""
    return obj if isinstance(obj, bytes) else json.dumps(obj).encode()


def unsecured(claims, header=None) -> str:
    return f"{b64(raw({'alg': 'none'} if header is None else header))}.{b64(raw(claims))}."


def signed(claims, header=None) -> str:
    """ES256 over whatever header and claims bytes are given, with the JWKS's key: a signature
    that verifies, so the claims are what the validator judges."""
    head = raw({"alg": "ES256", "kid": "e1", "typ": "JWT"} if header is None else header)
    signing_input = f"{b64(head)}.{b64(raw(claims))}".encode()
    r, s = decode_dss_signature(EC_KEY.sign(signing_input, ec.ECDSA(hashes.SHA256())))
    return f"{signing_input.decode()}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def jwks_doc() -> dict:
    pub = EC_KEY.public_key().public_numbers()
    return {"keys": [{"kty": "EC", "kid": "e1", "crv": "P-256", "use": "sig",
                      "x": b64(pub.x.to_bytes(32, "big")), "y": b64(pub.y.to_bytes(32, "big"))}]}


@pytest.fixture(scope="module")
def jwks_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps(jwks_doc()))
    return path


@pytest.fixture(scope="module")
def signed_validator(jwks_path):
    return JwksValidator.from_configs({"sasl.oauthbearer.jwks.endpoint.url": jwks_path.as_uri()})


def short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def good(**over) -> dict:
    return {"sub": "alice", "iat": NOW - 10, "exp": NOW + 600, **over}


HUGE = 10 ** 400
# (claims over a good set, header) — each malformed in one way only.
HOSTILE_CLAIMS = [
    {"exp": math.inf}, {"exp": -math.inf}, {"exp": math.nan}, {"exp": HUGE}, {"exp": -HUGE},
    {"exp": MAX_NUMERIC_DATE + 1}, {"exp": 1e300}, {"exp": [NOW + 600]}, {"exp": {"t": 1}}, {"exp": True},
    {"exp": "soon"},
    {"iat": math.nan}, {"iat": HUGE}, {"iat": math.inf}, {"iat": [1]}, {"iat": False},
    {"nbf": math.nan}, {"nbf": HUGE}, {"nbf": -math.inf}, {"nbf": {"x": []}}, {"nbf": "later"},
    {"sub": ["alice"]}, {"sub": {"name": "alice"}}, {"sub": 7}, {"sub": None}, {"sub": " "}, {"sub": "\ud800"},
    {"scope": [["read"]]}, {"scope": [{"a": 1}]}, {"scope": [None]}, {"scope": ["read", 5]},
]
HOSTILE_SIGNED_ONLY = [  # jose4j's type checks of the registered claims, present or not expected
    {"iss": ["https://idp"]}, {"iss": 5}, {"aud": 5}, {"aud": ["a", ["b"]]}, {"aud": {"a": 1}},
    {"jti": {"id": 1}}, {"scope": ""}, {"scope": ["read", "read"]}, {"iat": -1}, {"exp": -5},
]
HOSTILE_HEADERS_UNSECURED = [
    {"alg": ["none"]}, {"alg": {"none": 1}}, {"alg": None}, {"alg": math.nan}, {"alg": "none", "kid": ["k"]},
    {"alg": "none", "typ": {"t": 1}}, {"alg": "none", "kid": HUGE},
]
HOSTILE_HEADERS_SIGNED = [
    {"alg": ["ES256"], "kid": "e1"}, {"alg": {"ES256": 1}, "kid": "e1"}, {"alg": HUGE, "kid": "e1"},
    {"alg": "ES256", "kid": ["e1"]}, {"alg": "ES256", "kid": {"e1": 1}}, {"alg": "ES256", "kid": "e1", "typ": [1]},
    {"alg": "ES256", "kid": "e1", "cty": {"c": 1}}, {"alg": math.nan, "kid": "e1"},
]
# Whole parts that are not a JSON object of unique members in UTF-8 and base64url.
BAD_PARTS = [
    b'{"alg": "none", "alg": "none"}', b'{"sub": "a", "sub": "admin", "exp": 1}', b"\xff\xfe{}", b"[]", b"null",
    b"NaN", b"Infinity", b'{"a": NaN}', b'{"a": -Infinity}', b"[" * 50_000, b'{"a":' * 50_000, b"",
    b'{"a": 1' + b"1" * 5000 + b"}", b'"\\ud800"',
]


@pytest.mark.parametrize("over", HOSTILE_CLAIMS, ids=short)
def test_hostile_claims_refused_by_both_validators(over, signed_validator):
    with pytest.raises(InvalidToken):
        UnsecuredJwsValidator().validate(unsecured(good(**over)), NOW_MS)
    with pytest.raises(InvalidToken):
        signed_validator.validate(signed(good(**over)), NOW_MS)


@pytest.mark.parametrize("over", HOSTILE_SIGNED_ONLY, ids=short)
def test_signed_validator_checks_every_registered_claim(over, signed_validator):
    with pytest.raises(InvalidToken):
        signed_validator.validate(signed(good(**over)), NOW_MS)


@pytest.mark.parametrize("header", HOSTILE_HEADERS_UNSECURED, ids=short)
def test_hostile_unsecured_headers(header):
    with pytest.raises(InvalidToken):
        UnsecuredJwsValidator().validate(unsecured(good(), header), NOW_MS)


@pytest.mark.parametrize("header", HOSTILE_HEADERS_SIGNED, ids=short)
def test_hostile_signed_headers(header, signed_validator):
    with pytest.raises(InvalidToken):
        signed_validator.validate(signed(good(), header), NOW_MS)


@pytest.mark.parametrize("part", BAD_PARTS, ids=lambda p: repr(p[:24]))
def test_malformed_parts_in_header_and_payload(part, signed_validator):
    for token in (unsecured(part), unsecured(good(), part)):
        with pytest.raises(InvalidToken):
            UnsecuredJwsValidator().validate(token, NOW_MS)
    for token in (signed(part), signed(good(), part)):
        with pytest.raises(InvalidToken):
            signed_validator.validate(token, NOW_MS)


@pytest.mark.parametrize("token", [
    "e30.e30.", "e3=.e30.", "e30=.e30.", "e+0.e30.", "e/0.e30.", "e 30.e30.", "é30.e30.", "e30.e30.e30.e30",
    "!!.??.", "a.e30.",
])
def test_not_base64url(token, signed_validator):
    """Only the URL-safe alphabet without padding (RFC 7515 §2): a lenient decoder would skip
    the other characters and read something the sender did not write."""
    for v in (UnsecuredJwsValidator(), signed_validator):
        with pytest.raises(InvalidToken):
            v.validate(token, NOW_MS)


def test_duplicate_member_names_refused_as_jose4j_does(signed_validator):
    """A signed token whose claims name ``sub`` twice: one reader would take the first, another
    the last; jose4j refuses the token (its JsonUtil: "Names must be unique")."""
    claims = b'{"sub": "alice", "iat": %d, "exp": %d, "sub": "admin"}' % (NOW - 10, NOW + 600)
    with pytest.raises(InvalidToken, match="unique"):
        signed_validator.validate(signed(claims), NOW_MS)
    nested = b'{"sub": "alice", "iat": %d, "exp": %d, "x": {"a": 1, "a": 2}}' % (NOW - 10, NOW + 600)
    with pytest.raises(InvalidToken, match="unique"):
        signed_validator.validate(signed(nested), NOW_MS)
    header = b'{"alg": "ES256", "kid": "e1", "kid": "e1"}'
    with pytest.raises(InvalidToken, match="unique"):
        signed_validator.validate(signed(good(), header), NOW_MS)
    with pytest.raises(InvalidToken, match="unique"):
        UnsecuredJwsValidator().validate(unsecured(claims), NOW_MS)
    # The same claims once each are accepted.
    assert signed_validator.validate(signed(good()), NOW_MS) == ("alice", (NOW + 600) * 1000)


def test_numeric_dates_at_the_edge_of_the_range(signed_validator):
    """The far end of the range is valid (jose4j keeps seconds in a long, Kafka milliseconds);
    the mechanism's session expiry stays one the SaslAuthenticate answer can carry."""
    for v, token in ((UnsecuredJwsValidator(), unsecured(good(exp=MAX_NUMERIC_DATE))),
                     (signed_validator, signed(good(exp=MAX_NUMERIC_DATE)))):
        principal, expiry_ms = v.validate(token, NOW_MS)
        assert principal == "alice" and expiry_ms <= 2 ** 63 - 1
        server = OAuthBearerServer(v, lambda: NOW_MS)
        assert server.step(f"n,,\x01auth=Bearer {token}\x01\x01".encode()) == (b"", True)
        assert server.session_expiry_ms - NOW_MS <= 10 ** 15
    assert signed_validator.validate(signed(good(exp=float(NOW + 600))), NOW_MS)[1] == (NOW + 600) * 1000


def test_through_the_mechanism_an_answer_never_an_exception(signed_validator):
    for v, make in ((UnsecuredJwsValidator(), unsecured), (signed_validator, signed)):
        for over in HOSTILE_CLAIMS:
            server = OAuthBearerServer(v, lambda: NOW_MS)
            assert server.step(f"n,,\x01auth=Bearer {make(good(**over))}\x01\x01".encode()) == (
                INVALID_TOKEN_RESPONSE.encode(), False)
            with pytest.raises(SaslAuthenticationFailed) as exc:
                server.step(b"\x01")
            assert "\n" not in exc.value.detail and len(exc.value.detail) < 400


# ------------------------------------------------------------------------------ on the wire


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """Two SASL_PLAINTEXT listeners on loopback offering OAUTHBEARER: UNSECURED (Kafka's default
    validator) and SIGNED (a JWKS file)."""
    d = tmp_path_factory.mktemp("hostile-tokens")
    jwks = d / "jwks.json"
    jwks.write_text(json.dumps(jwks_doc()))
    unsecured_port, signed_port = free_port(), free_port()
    b = BrokerProcess(str(d / "broker"), extra_args=[
        "--override", f"listeners=PLAINTEXT://127.0.0.1:0,UNSECURED://127.0.0.1:{unsecured_port},"
                      f"SIGNED://127.0.0.1:{signed_port}",
        "--override", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,UNSECURED:SASL_PLAINTEXT,"
                      "SIGNED:SASL_PLAINTEXT",
        "--override", "sasl.enabled.mechanisms=OAUTHBEARER",
        "--override", f"listener.name.unsecured.oauthbearer.sasl.jaas.config={OAUTH_JAAS}",
        "--override", f"listener.name.signed.oauthbearer.sasl.jaas.config={OAUTH_JAAS}",
        "--override", f"listener.name.signed.oauthbearer.sasl.oauthbearer.jwks.endpoint.url={jwks.as_uri()}"])
    b.start()
    b.unsecured_port, b.signed_port = unsecured_port, signed_port
    yield b
    b.kill()


def authenticate(port: int, token: str):
    c = RawClient(f"127.0.0.1:{port}")
    try:
        hs = c.request(request_module(17, 1).SaslHandshakeRequest(mechanism="OAUTHBEARER"))
        assert hs.error_code == ErrorCode.none
        m = request_module(36, 2)
        answer = c.request(m.SaslAuthenticateRequest(auth_bytes=f"n,,\x01auth=Bearer {token}\x01\x01".encode()))
        if answer.error_code == ErrorCode.none and answer.auth_bytes:
            assert json.loads(answer.auth_bytes) == {"status": "invalid_token"}
            answer = c.request(m.SaslAuthenticateRequest(auth_bytes=b"\x01"))
        return answer
    finally:
        c.close()


@pytest.mark.e2e
def test_hostile_tokens_on_the_wire_are_answered_58_with_a_one_line_reason(broker):
    unsecured_port, signed_port = broker.unsecured_port, broker.signed_port
    cases = [(unsecured_port, unsecured(good(), {"alg": ["none"]})),
             (signed_port, signed(good(), {"alg": ["ES256"], "kid": "e1"})),
             (signed_port, signed(good(), {"alg": {"x": 1}, "kid": "e1"}))]
    for over in ({"exp": math.inf}, {"exp": math.nan}, {"exp": HUGE}, {"iat": math.nan}, {"nbf": HUGE},
                 {"scope": [["read"]]}):
        cases += [(unsecured_port, unsecured(good(**over))), (signed_port, signed(good(**over)))]
    cases.append((signed_port, signed(b'{"sub": "alice", "iat": 1, "exp": 99999999999, "sub": "admin"}')))
    for port, token in cases:
        answer = authenticate(port, token)
        assert answer.error_code == ErrorCode.sasl_authentication_failed, (port, token)
        assert answer.error_message == INVALID_TOKEN_RESPONSE
    log = open(broker.log_path, errors="replace").read()
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]
    reasons = [line for line in log.splitlines() if "SASL OAUTHBEARER authentication failed" in line]
    assert reasons and all("invalid token: " in line for line in reasons), log[-3000:]
    # The broker still serves: a valid token authenticates on both listeners, and one valid to
    # the far end of the NumericDate range too (its session lifetime is one the answer carries).
    for port, make in ((unsecured_port, unsecured), (signed_port, signed)):
        for claims in (good(exp=2_000_000_000), good(exp=MAX_NUMERIC_DATE)):
            answer = authenticate(port, make(claims))
            assert answer.error_code == ErrorCode.none and answer.session_lifetime.total_seconds() > 0
