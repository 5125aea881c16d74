"""Signed OAUTHBEARER tokens (KIP-768's broker validator): tokens signed here with
``cryptography`` (RS256/384/512, PS256, ES256/384) against a JWKS file; the key chosen by kid;
exp/iat/nbf with the clock skew; audience and issuer; alg none and HMAC refused; through the
OAUTHBEARER server mechanism, an invalid token answers ``{"status":"invalid_token"}``."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from oncelog.security.jwt import InvalidToken, JwksConfigError, JwksValidator, jwks_file, parse_jwks
from oncelog.security.sasl import INVALID_TOKEN_RESPONSE, SaslServerMechanisms

NOW_MS = 1_700_000_000_000
NOW = NOW_MS // 1000


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int(n: int) -> str:
    return b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))


def rsa_jwk(key, kid):
    pub = key.public_key().public_numbers()
    return {"kty": "RSA", "kid": kid, "use": "sig", "n": _int(pub.n), "e": _int(pub.e)}


def ec_jwk(key, kid, crv):
    pub = key.public_key().public_numbers()
    size = 32 if crv == "P-256" else 48
    return {"kty": "EC", "kid": kid, "crv": crv, "x": b64(pub.x.to_bytes(size, "big")),
            "y": b64(pub.y.to_bytes(size, "big"))}


def sign(key, alg: str, claims: dict, kid: str | None = "k1", header: dict | None = None) -> str:
    h = {"alg": alg, "typ": "JWT", **({"kid": kid} if kid else {}), **(header or {})}
    signing_input = f"{b64(json.dumps(h).encode())}.{b64(json.dumps(claims).encode())}".encode()
    digest = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}[alg[2:]]
    if alg.startswith("RS"):
        sig = key.sign(signing_input, padding.PKCS1v15(), digest())
    elif alg.startswith("PS"):
        sig = key.sign(signing_input, padding.PSS(padding.MGF1(digest()), digest().digest_size), digest())
    else:
        r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(digest())))
        size = 32 if alg == "ES256" else 48
        sig = r.to_bytes(size, "big") + s.to_bytes(size, "big")
    return f"{signing_input.decode()}.{b64(sig)}"


@pytest.fixture(scope="module")
def keys():
    return {"rsa": rsa.generate_private_key(65537, 2048), "rsa2": rsa.generate_private_key(65537, 2048),
            "p256": ec.generate_private_key(ec.SECP256R1()), "p384": ec.generate_private_key(ec.SECP384R1())}


@pytest.fixture
def jwks_path(tmp_path, keys):
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [
        rsa_jwk(keys["rsa"], "k1"), rsa_jwk(keys["rsa2"], "k2"), ec_jwk(keys["p256"], "e256", "P-256"),
        ec_jwk(keys["p384"], "e384", "P-384"), {"kty": "oct", "kid": "h", "k": "c2VjcmV0"}]}))
    return path


def validator(jwks_path, **configs) -> JwksValidator:
    return JwksValidator.from_configs({"sasl.oauthbearer.jwks.endpoint.url": jwks_path.as_uri(), **configs})


def claims(**over):
    return {"sub": "alice", "iat": NOW - 10, "exp": NOW + 600, **over}


@pytest.mark.parametrize("alg, key, kid", [("RS256", "rsa", "k1"), ("RS384", "rsa", "k1"), ("RS512", "rsa2", "k2"),
                                           ("PS256", "rsa", "k1"), ("ES256", "p256", "e256"),
                                           ("ES384", "p384", "e384")])
def test_valid_signed_tokens(jwks_path, keys, alg, key, kid):
    assert validator(jwks_path).validate(sign(keys[key], alg, claims(), kid), NOW_MS) == ("alice", (NOW + 600) * 1000)


def test_key_chosen_by_kid_and_without_kid(jwks_path, keys):
    v = validator(jwks_path)
    with pytest.raises(InvalidToken, match="signature is invalid"):  # k1's kid, k2's signature
        v.validate(sign(keys["rsa2"], "RS256", claims(), "k1"), NOW_MS)
    with pytest.raises(InvalidToken, match="suitable verification key"):
        v.validate(sign(keys["rsa"], "RS256", claims(), "unknown"), NOW_MS)
    with pytest.raises(InvalidToken, match="suitable verification key"):  # an RSA kid for an EC algorithm
        v.validate(sign(keys["p256"], "ES256", claims(), "k1"), NOW_MS)
    # No kid: the first key that fits the algorithm.
    assert v.validate(sign(keys["rsa"], "RS256", claims(), None), NOW_MS)[0] == "alice"


def test_tampered_claims_refused(jwks_path, keys):
    token = sign(keys["rsa"], "RS256", claims())
    h, _, s = token.split(".")
    forged = f"{h}.{b64(json.dumps(claims(sub='admin')).encode())}.{s}"
    with pytest.raises(InvalidToken, match="signature is invalid"):
        validator(jwks_path).validate(forged, NOW_MS)


@pytest.mark.parametrize("alg", ["none", "HS256", None, "RS1"])
def test_disallowed_algorithms(jwks_path, alg):
    token = f"{b64(json.dumps({'alg': alg}).encode())}.{b64(json.dumps(claims()).encode())}."
    with pytest.raises(InvalidToken, match="not allowed"):
        validator(jwks_path).validate(token, NOW_MS)


def test_time_claims_with_skew(jwks_path, keys):
    v = validator(jwks_path)  # skew 30 s by default
    assert v.validate(sign(keys["rsa"], "RS256", claims(exp=NOW - 29)), NOW_MS)
    with pytest.raises(InvalidToken, match="no longer valid"):
        v.validate(sign(keys["rsa"], "RS256", claims(exp=NOW - 30)), NOW_MS)
    with pytest.raises(InvalidToken, match="no longer valid"):
        validator(jwks_path, **{"sasl.oauthbearer.clock.skew.seconds": "0"}).validate(
            sign(keys["rsa"], "RS256", claims(exp=NOW)), NOW_MS)
    for missing in ("exp", "iat"):
        c = claims()
        del c[missing]
        with pytest.raises(InvalidToken, match=f"\\({missing}\\) claim present"):
            v.validate(sign(keys["rsa"], "RS256", c), NOW_MS)
    assert v.validate(sign(keys["rsa"], "RS256", claims(nbf=NOW + 30)), NOW_MS)
    with pytest.raises(InvalidToken, match="not yet valid"):
        v.validate(sign(keys["rsa"], "RS256", claims(nbf=NOW + 31)), NOW_MS)
    with pytest.raises(InvalidToken, match="in the future"):
        v.validate(sign(keys["rsa"], "RS256", claims(iat=NOW + 31)), NOW_MS)
    with pytest.raises(InvalidToken, match="incorrect type"):
        v.validate(sign(keys["rsa"], "RS256", claims(exp="soon")), NOW_MS)


def test_audience_and_issuer(jwks_path, keys):
    v = validator(jwks_path, **{"sasl.oauthbearer.expected.audience": "kafka, oncelog",
                                "sasl.oauthbearer.expected.issuer": "https://idp.example"})
    good = claims(aud=["other", "oncelog"], iss="https://idp.example")
    assert v.validate(sign(keys["rsa"], "RS256", good), NOW_MS)[0] == "alice"
    assert v.validate(sign(keys["rsa"], "RS256", {**good, "aud": "kafka"}), NOW_MS)[0] == "alice"
    with pytest.raises(InvalidToken, match="acceptable identifier"):
        v.validate(sign(keys["rsa"], "RS256", {**good, "aud": "other"}), NOW_MS)
    with pytest.raises(InvalidToken, match="No Audience"):
        v.validate(sign(keys["rsa"], "RS256", {k: x for k, x in good.items() if k != "aud"}), NOW_MS)
    with pytest.raises(InvalidToken, match="Issuer"):
        v.validate(sign(keys["rsa"], "RS256", {**good, "iss": "https://evil.example"}), NOW_MS)
    # No expected audience: a token naming one is refused (jose4j's default, kept by Kafka).
    with pytest.raises(InvalidToken, match="no expected audience"):
        validator(jwks_path).validate(sign(keys["rsa"], "RS256", claims(aud="kafka")), NOW_MS)


def test_sub_claim_name_and_blank_subject(jwks_path, keys):
    v = validator(jwks_path, **{"sasl.oauthbearer.sub.claim.name": "client_id"})
    assert v.validate(sign(keys["rsa"], "RS256", claims(client_id="svc-1")), NOW_MS)[0] == "svc-1"
    with pytest.raises(InvalidToken, match="client_id"):
        v.validate(sign(keys["rsa"], "RS256", claims()), NOW_MS)
    with pytest.raises(InvalidToken, match="sub"):
        validator(jwks_path).validate(sign(keys["rsa"], "RS256", claims(sub="  ")), NOW_MS)


def test_crit_header_and_malformed(jwks_path, keys):
    v = validator(jwks_path)
    with pytest.raises(InvalidToken, match="critical"):
        v.validate(sign(keys["rsa"], "RS256", claims(), header={"crit": ["exp"]}), NOW_MS)
    for bad in ("a.b", "!!.??.xx", f"{b64(b'[1]')}.{b64(b'{}')}.x"):
        with pytest.raises(InvalidToken):
            v.validate(bad, NOW_MS)


def test_jwks_urls_and_files(tmp_path):
    with pytest.raises(JwksConfigError, match="does not fetch a JWKS over the network"):
        jwks_file("https://idp.example/.well-known/jwks.json")
    with pytest.raises(JwksConfigError, match="invalid protocol"):
        jwks_file("ftp://x/jwks.json")
    with pytest.raises(JwksConfigError, match="doesn't exist"):
        jwks_file((tmp_path / "missing.json").as_uri())
    with pytest.raises(JwksConfigError, match="directory"):
        jwks_file(tmp_path.as_uri())
    with pytest.raises(JwksConfigError, match="must be non-null"):
        JwksValidator.from_configs({})
    with pytest.raises(JwksConfigError, match="keys"):
        parse_jwks('{"k": []}')
    with pytest.raises(JwksConfigError, match="not JSON"):
        parse_jwks("nope")


def test_through_the_oauthbearer_mechanism(jwks_path, keys):
    mechanisms = SaslServerMechanisms(enabled=("OAUTHBEARER",), oauthbearer=validator(jwks_path), clock=lambda: NOW_MS)
    server = mechanisms.start("OAUTHBEARER")
    token = sign(keys["p256"], "ES256", claims(), "e256")
    assert server.step(f"n,,\x01auth=Bearer {token}\x01\x01".encode()) == (b"", True)
    assert server.principal == "User:alice" and server.session_expiry_ms == (NOW + 600) * 1000
    # An unsecured token is refused when a JWKS is configured.
    unsecured = f"{b64(json.dumps({'alg': 'none'}).encode())}.{b64(json.dumps(claims()).encode())}."
    server = mechanisms.start("OAUTHBEARER")
    assert server.step(f"n,,\x01auth=Bearer {unsecured}\x01\x01".encode()) == (INVALID_TOKEN_RESPONSE.encode(), False)
    assert not server.complete
