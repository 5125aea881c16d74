"""The OAUTHBEARER token validators take any token a client sends before it is authenticated: with
JSON of every shape in the header and the claims (nested lists and objects, huge integers,
floats, NaN and Infinity literals, null, booleans, duplicate member names), with bytes that are
not UTF-8 and parts that are not base64url, each validator — the unsecured one and the signed
(JWKS) one, the latter with tokens whose signature verifies, so its claim checks are reached —
either accepts the token or raises :class:`~oncelog.security.jwt.InvalidToken`, never anything
else; an accepted token names a non-blank principal and an expiry in range."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oncelog.security.jwt import InvalidToken, JwksValidator
from oncelog.security.sasl import OAuthBearerServer, SaslAuthenticationFailed, UnsecuredJwsValidator

NOW_MS = 1_700_000_000_000
NOW = NOW_MS // 1000
KEY = ec.generate_private_key(ec.SECP256R1())
LONG = 2 ** 63


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def signed_validator(tmp_path_factory):
    pub = KEY.public_key().public_numbers()
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps({"keys": [{"kty": "EC", "kid": "e1", "crv": "P-256", "x": b64(pub.x.to_bytes(32, "big")),
                                          "y": b64(pub.y.to_bytes(32, "big"))}]}))
    return JwksValidator.from_configs({"sasl.oauthbearer.jwks.endpoint.url": path.as_uri(),
                                       "sasl.oauthbearer.expected.audience": "kafka"})


# -- JSON text of every shape, written by hand so that it can hold what json.dumps never writes:
# duplicate member names, NaN/Infinity literals, numbers far beyond a double.

def number_text():
    return st.one_of(
        st.integers().map(str),
        st.integers(min_value=-10 ** 450, max_value=10 ** 450).map(str),
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
        st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e-400", "9223372036854775",
                         "9223372036854776", "9223372036854775807", "-9223372036854775808", "0.5", "-0", "1E2"]),
        st.integers(min_value=NOW - 100_000, max_value=NOW + 100_000).map(str))


def string_text():
    return st.one_of(
        st.text(max_size=12).map(json.dumps),
        st.sampled_from(['"none"', '"ES256"', '"RS256"', '"e1"', '"kafka"', '"alice"', '"JWT"', '""', '" "',
                         '"\\ud800"', '"\\udfff\\ud800"', '"a\\u0000b"', '"read write"']))


def json_text():
    scalars = st.one_of(st.just("null"), st.just("true"), st.just("false"), number_text(), string_text())
    return st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda items: "[" + ",".join(items) + "]"),
        st.lists(st.tuples(string_text(), inner), max_size=4).map(
            lambda pairs: "{" + ",".join(f"{k}:{v}" for k, v in pairs) + "}")), max_leaves=12)


NAMES = ["alg", "kid", "typ", "cty", "crit", "exp", "iat", "nbf", "sub", "iss", "aud", "scope", "jti", "x"]


def members(required: dict[str, object]):
    """A JSON object's text: the required members, one or two of them maybe replaced by any JSON
    value, some other registered names with any value, and now and then a name written twice."""
    def build(replace, extra, dupe):
        fields = {k: json.dumps(v) for k, v in required.items()}
        fields.update(replace)
        for k, v in extra.items():
            fields.setdefault(k, v)
        pairs = list(fields.items()) + ([dupe] if dupe is not None else [])
        return ("{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in pairs) + "}").encode()

    names = st.sampled_from(list(required) or ["x"])
    return st.builds(build,
                     st.dictionaries(names, json_text(), max_size=2),
                     st.dictionaries(st.sampled_from(NAMES), json_text(), max_size=2),
                     weighted(st.none(), st.tuples(names, json_text())))


def weighted(common, *rare):
    """``common`` most of the time (8 in 8 + len(rare)), else one of ``rare``: hypothesis's one_of
    draws its branches alike, and most tokens should get past the parsing to the claims."""
    return st.integers(0, 7 + len(rare)).flatmap(lambda i: common if i < 8 else rare[i - 8])


def part_bytes(required: dict[str, object]):
    """A part's bytes: mostly an object built around the required members; else any JSON value,
    or bytes that are not UTF-8 JSON."""
    return weighted(members(required), json_text().map(str.encode), st.binary(max_size=40),
                    st.sampled_from([b"\xff\xfe{}", b"[" * 3000, b'{"a":' * 3000, b"\xed\xa0\x80", b""]))


def encoded(data):
    """A part's text: mostly base64url; else something else (padding, the standard alphabet,
    noise)."""
    return weighted(st.just(b64(data)), st.just(base64.urlsafe_b64encode(data).decode()),
                    st.just(base64.b64encode(data).decode()), st.text(max_size=20))


GOOD_CLAIMS = {"sub": "alice", "iat": NOW - 10, "exp": NOW + 600, "aud": "kafka"}


def unsecured_tokens():
    return st.builds(lambda h, c, sig: f"{h}.{c}.{sig}",
                     part_bytes({"alg": "none"}).flatmap(encoded), part_bytes(GOOD_CLAIMS).flatmap(encoded),
                     weighted(st.just(""), st.just("x"), st.just("e30")))


def sign(header: bytes, claims: bytes) -> str:
    signing_input = f"{b64(header)}.{b64(claims)}".encode()
    r, s = decode_dss_signature(KEY.sign(signing_input, ec.ECDSA(hashes.SHA256())))
    return f"{signing_input.decode()}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def signed_tokens():
    """Mostly signed with the JWKS's key over the fuzzed bytes (the claims are then judged);
    sometimes with the parts re-encoded in a wrong way after signing."""
    signed = st.builds(sign, part_bytes({"alg": "ES256", "kid": "e1"}), part_bytes(GOOD_CLAIMS))
    mangled = st.builds(lambda t, h: f"{h}.{t.split('.', 1)[1]}", signed,
                        part_bytes({"alg": "ES256", "kid": "e1"}).flatmap(encoded))
    return weighted(signed, mangled, st.text(max_size=60))


def check(validator, token: str) -> None:
    try:
        principal, expiry_ms = validator.validate(token, NOW_MS)
    except InvalidToken as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 500, str(exc)
        return
    assert isinstance(principal, str) and principal.strip()
    principal.encode("utf-8")  # a principal is always writable (to the log, to an ACL)
    assert isinstance(expiry_ms, int) and NOW_MS <= expiry_ms + 30_000 and -LONG <= expiry_ms < LONG
    # Through the mechanism the valid token completes, with a session expiry an answer can carry.
    server = OAuthBearerServer(validator, lambda: NOW_MS)
    try:
        answer, done = server.step(f"n,,\x01auth=Bearer {token}\x01\x01".encode())
    except SaslAuthenticationFailed:
        return  # the token text itself broke the framing (e.g. a \x01 in a fuzzed part)
    assert done and server.session_expiry_ms - NOW_MS <= 10 ** 15


FUZZ = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.function_scoped_fixture])


@FUZZ
@given(unsecured_tokens())
def test_unsecured_validator_accepts_or_refuses_any_token(token):
    check(UnsecuredJwsValidator(), token)
    check(UnsecuredJwsValidator(required_scope=("read",), allowable_clock_skew_ms=1000), token)


@FUZZ
@given(token=signed_tokens())
def test_signed_validator_accepts_or_refuses_any_token(signed_validator, token):
    check(signed_validator, token)
