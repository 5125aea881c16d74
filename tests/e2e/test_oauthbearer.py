"""Signed OAUTHBEARER tokens on a real broker (KIP-768's broker validator): a
SASL_PLAINTEXT listener with ``sasl.oauthbearer.jwks.endpoint.url`` a ``file:`` JWKS, the
expected audience and issuer; tokens signed in the test with ``cryptography``. librdkafka
(confluent-kafka's ``oauth_cb``) produces and consumes with a valid token and is refused with an
expired one; at the protocol level a wrong signature, an unknown kid, a wrong audience and an
unsecured (alg none) token are refused with SASL_AUTHENTICATION_FAILED; KIP-368: the session
lifetime is the token's remaining life when that is shorter than ``connections.max.reauth.ms``."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from kio.schema.errors import ErrorCode

from oncelog.client.wire import RawClient, request_module
from oncelog.process import BrokerProcess
from tests.helpers import free_port

pytestmark = pytest.mark.e2e

JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
ISSUER = "https://idp.example"
RSA_KEY = rsa.generate_private_key(65537, 2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_KEY = rsa.generate_private_key(65537, 2048)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int(n: int, size: int | None = None) -> str:
    return b64(n.to_bytes(size or (n.bit_length() + 7) // 8, "big"))


def sign(key, claims: dict, kid: str = "rsa-1", alg: str = "RS256") -> str:
    header = {"alg": alg, "typ": "JWT", "kid": kid}
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}".encode()
    if alg == "none":
        return signing_input.decode() + "."
    if alg == "ES256":
        r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
        sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    else:
        sig = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input.decode()}.{b64(sig)}"


def claims(sub: str = "alice", lifetime: float = 600, **over) -> dict:
    now = int(time.time())
    return {"sub": sub, "iat": now, "exp": now + lifetime, "aud": "oncelog", "iss": ISSUER, **over}




@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("oauthbearer")
    pub, ecpub = RSA_KEY.public_key().public_numbers(), EC_KEY.public_key().public_numbers()
    jwks = d / "jwks.json"
    jwks.write_text(json.dumps({"keys": [
        {"kty": "RSA", "kid": "rsa-1", "use": "sig", "alg": "RS256", "n": _int(pub.n), "e": _int(pub.e)},
        {"kty": "EC", "kid": "ec-1", "crv": "P-256", "x": _int(ecpub.x, 32), "y": _int(ecpub.y, 32)}]}))
    port = free_port()
    prefix = "listener.name.sasl_plaintext.oauthbearer."
    b = BrokerProcess(str(d / "broker"), extra_args=[
        "--override", f"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}",
        "--override", "listener.name.sasl_plaintext.sasl.enabled.mechanisms=OAUTHBEARER",
        "--override", f"{prefix}sasl.jaas.config={JAAS}",
        "--override", f"{prefix}sasl.server.callback.handler.class={VALIDATOR}",
        "--override", f"{prefix}sasl.oauthbearer.jwks.endpoint.url={jwks.as_uri()}",
        "--override", "sasl.oauthbearer.expected.audience=kafka,oncelog",
        "--override", f"sasl.oauthbearer.expected.issuer={ISSUER}",
        "--override", "connections.max.reauth.ms=600000"])
    b.start()
    b.sasl_port = port
    yield b
    b.kill()


def _conf(b, token_for) -> dict:
    def oauth_cb(_config):
        token, c = token_for()
        # librdkafka refuses to send a token it knows is expired: it is told a future expiry;
        # the broker goes by the token's own exp.
        return token, max(float(c["exp"]), time.time() + 60), c["sub"], {}

    return {"bootstrap.servers": f"127.0.0.1:{b.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "oauth_cb": oauth_cb}


def _authenticate(b, token: str, authzid: str = ""):
    c = RawClient(f"127.0.0.1:{b.sasl_port}")
    try:
        hs = c.request(request_module(17, 1).SaslHandshakeRequest(mechanism="OAUTHBEARER"))
        assert hs.error_code == ErrorCode.none and list(hs.mechanisms) == ["OAUTHBEARER"]
        m = request_module(36, 2)
        gs2 = f"n,a={authzid}," if authzid else "n,,"
        answer = c.request(m.SaslAuthenticateRequest(auth_bytes=f"{gs2}\x01auth=Bearer {token}\x01\x01".encode()))
        if answer.error_code == ErrorCode.none and answer.auth_bytes:
            # RFC 7628: an invalid token is answered with the error JSON; the client's \x01 ends it.
            assert json.loads(answer.auth_bytes) == {"status": "invalid_token"}
            answer = c.request(m.SaslAuthenticateRequest(auth_bytes=b"\x01"))
        return answer
    finally:
        c.close()


def test_librdkafka_with_a_signed_token_produces_and_consumes_as_its_subject(broker):
    def token_for():
        c = claims("alice")
        return sign(RSA_KEY, c), c

    conf, topic = _conf(broker, token_for), f"oauth-{uuid.uuid4().hex[:6]}"
    p = Producer({**conf, "message.timeout.ms": 10000})
    results = []
    p.produce(topic, b"signed", on_delivery=lambda err, msg: results.append(err))
    p.flush(20)
    assert results == [None]
    c = Consumer({**conf, "group.id": "g-oauth", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = None
    for _ in range(40):
        m = c.poll(0.5)
        if m is not None and not m.error():
            got = m.value()
            break
    c.close()
    assert got == b"signed"
    with open(broker.log_path) as f:
        assert "User:alice authenticated with SASL OAUTHBEARER" in f.read()


def test_an_es256_token_authenticates_and_an_authzid_must_be_its_subject(broker):
    assert _authenticate(broker, sign(EC_KEY, claims("bob"), kid="ec-1", alg="ES256")).error_code == ErrorCode.none
    answer = _authenticate(broker, sign(RSA_KEY, claims("bob")), authzid="admin")
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert "token's principal name (bob)" in answer.error_message


def test_librdkafka_with_an_expired_token_is_refused_and_nothing_is_written(broker):
    def token_for():
        c = claims("alice", lifetime=-120)  # beyond the 30 s clock skew
        return sign(RSA_KEY, c), c

    topic = f"expired-{uuid.uuid4().hex[:6]}"
    results = []
    p = Producer({**_conf(broker, token_for), "message.timeout.ms": 4000})
    p.produce(topic, b"x", on_delivery=lambda err, msg: results.append(err))
    p.flush(15)
    assert len(results) == 1 and results[0] is not None
    with open(broker.log_path) as f:
        assert "SASL OAUTHBEARER authentication failed from 127.0.0.1" in f.read()
    assert topic not in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics


@pytest.mark.parametrize("case", ["expired", "wrong signature", "unknown kid", "wrong audience", "no audience",
                                  "wrong issuer", "alg none"])
def test_invalid_tokens_are_refused(broker, case):
    token = {
        "expired": lambda: sign(RSA_KEY, claims(lifetime=-120)),
        "wrong signature": lambda: sign(OTHER_KEY, claims()),
        "unknown kid": lambda: sign(RSA_KEY, claims(), kid="rsa-2"),
        "wrong audience": lambda: sign(RSA_KEY, claims(aud="elsewhere")),
        "no audience": lambda: sign(RSA_KEY, {k: v for k, v in claims().items() if k != "aud"}),
        "wrong issuer": lambda: sign(RSA_KEY, claims(iss="https://evil.example")),
        "alg none": lambda: sign(None, claims(), alg="none"),
    }[case]()
    answer = _authenticate(broker, token)
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert answer.error_message == '{"status":"invalid_token"}'


def test_session_lifetime_is_the_tokens_when_shorter_than_connections_max_reauth_ms(broker):
    answer = _authenticate(broker, sign(RSA_KEY, claims(lifetime=20)))
    assert answer.error_code == ErrorCode.none
    assert 15 < answer.session_lifetime.total_seconds() <= 20  # not connections.max.reauth.ms (600 s)
    answer = _authenticate(broker, sign(RSA_KEY, claims(lifetime=3600)))
    assert answer.session_lifetime.total_seconds() == 600


def test_an_https_jwks_url_stops_the_start_with_a_clear_message(tmp_path):
    b = BrokerProcess(str(tmp_path / "broker"), extra_args=[
        "--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
        "--override", "sasl.enabled.mechanisms=OAUTHBEARER",
        "--override", f"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config={JAAS}",
        "--override", "sasl.oauthbearer.jwks.endpoint.url=https://idp.example/jwks.json"])
    with pytest.raises(Exception):
        b.start(timeout=15)
    try:
        assert "does not fetch a JWKS over the network" in b.tail_log(50)
    finally:
        b.kill()


def test_a_bad_key_in_the_jwks_file_stops_the_start(tmp_path):
    """The JWKS is read when the broker opens, so a key it cannot use is a configuration
    error at start (exit 2, one line), not a failure of the first client."""
    jwks = tmp_path / "bad-jwks.json"
    jwks.write_text(json.dumps({"keys": [{"kty": "RSA", "kid": "k1", "n": "not-base64!"}]}))
    done = subprocess.run([sys.executable, "-m", "oncelog", "serve", "--data-dir", str(tmp_path / "data"),
                           "--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
                           "--override", "sasl.enabled.mechanisms=OAUTHBEARER",
                           "--override", f"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config={JAAS}",
                           "--override", f"sasl.oauthbearer.jwks.endpoint.url={jwks.as_uri()}"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "oncelog serve: a JWK without its 'e' member" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
