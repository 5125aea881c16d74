"""The SASL server mechanisms, sans-IO: scramp's client against the SCRAM server, PLAIN cases,
OAUTHBEARER unsecured tokens, the JAAS parsing of the users. Bytes in, bytes out, no broker."""

from __future__ import annotations

import base64
import json

import pytest
import scramp

from oncelog.security.jaas import JaasConfigError, parse_jaas_entries
from oncelog.security.sasl import (
    INVALID_TOKEN_RESPONSE, SaslAuthenticationFailed, SaslServerMechanisms, UnsecuredJwsValidator,
    UnsupportedSaslMechanism, plain_users_from_jaas,
)
from oncelog.security.scram import ScramCredentialStore

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
JAAS = (f'{PLAIN_MODULE} required username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice-secret";')
NOW_MS = 1_700_000_000_000


def generic(mechanism, what="authentication"):
    return f"Authentication failed during {what} due to invalid credentials with SASL mechanism {mechanism}"


@pytest.fixture
def mechanisms(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    assert store.set_password("alice", "SCRAM-SHA-256", "alice-pw", 8192).error_code == 0
    assert store.set_password("alice", "SCRAM-SHA-512", "alice-pw512", 4096).error_code == 0
    return SaslServerMechanisms(plain_users=plain_users_from_jaas(JAAS), scram_credentials=store,
                                oauthbearer=UnsecuredJwsValidator(), clock=lambda: NOW_MS)


# ---------------------------------------------------------------------------- SCRAM


def scram_exchange(mechanisms, mechanism, user, password):
    """scramp's client against our server; returns the server mechanism (complete) or raises."""
    client = scramp.ScramClient([mechanism], user, password)
    server = mechanisms.start(mechanism)
    server_first, done = server.step(client.get_client_first().encode())
    assert not done
    client.set_server_first(server_first.decode())
    server_final, done = server.step(client.get_client_final().encode())
    assert done
    client.set_server_final(server_final.decode())  # checks the verifier: the server knew the key
    return server


@pytest.mark.parametrize("mechanism, password", [("SCRAM-SHA-256", "alice-pw"), ("SCRAM-SHA-512", "alice-pw512")])
def test_scram_success(mechanisms, mechanism, password):
    server = scram_exchange(mechanisms, mechanism, "alice", password)
    assert server.complete and server.principal == "User:alice" and server.session_expiry_ms is None
    with pytest.raises(SaslAuthenticationFailed):
        server.step(b"c=biws")  # nothing after completion


@pytest.mark.parametrize("user, password", [("alice", "wrong"), ("mallory", "alice-pw")])
def test_scram_wrong_password_and_unknown_user_look_the_same(mechanisms, user, password):
    with pytest.raises(SaslAuthenticationFailed) as exc:
        scram_exchange(mechanisms, "SCRAM-SHA-256", user, password)
    assert str(exc.value) == generic("SCRAM-SHA-256")
    assert f"(user {user!r})" in exc.value.detail and password not in exc.value.detail


def test_scram_mechanism_without_credential(mechanisms, tmp_path):
    store = ScramCredentialStore(str(tmp_path / "other"))
    store.set_password("bob", "SCRAM-SHA-256", "pw")
    m = SaslServerMechanisms(scram_credentials=store)
    with pytest.raises(SaslAuthenticationFailed, match="SCRAM-SHA-512"):
        scram_exchange(m, "SCRAM-SHA-512", "bob", "pw")


def test_scram_replayed_client_final_is_refused(mechanisms):
    client = scramp.ScramClient(["SCRAM-SHA-256"], "alice", "alice-pw")
    client_first = client.get_client_first().encode()
    first = mechanisms.start("SCRAM-SHA-256")
    server_first, _ = first.step(client_first)
    client.set_server_first(server_first.decode())
    client_final = client.get_client_final().encode()
    # A second exchange with the same client-first gets a fresh server nonce: the recorded
    # client-final (proof bound to the first nonce) is refused.
    second = mechanisms.start("SCRAM-SHA-256")
    second.step(client_first)
    with pytest.raises(SaslAuthenticationFailed, match="invalid credentials"):
        second.step(client_final)
    assert not second.complete and second.principal is None
    assert first.step(client_final)[1]  # the original exchange still completes


def test_scram_malformed_and_authzid(mechanisms):
    for message in (b"garbage", b"\xff\xfe", b"n,a=alice,n=alice,r=abcdefgh", b"n,,n=alice,r=abc,tokenauth=true"):
        with pytest.raises(SaslAuthenticationFailed) as exc:
            mechanisms.start("SCRAM-SHA-256").step(message)
        assert str(exc.value) == generic("SCRAM-SHA-256")


def test_reauthentication_wording(mechanisms):
    server = mechanisms.start("SCRAM-SHA-256", reauthentication=True)
    with pytest.raises(SaslAuthenticationFailed, match="during re-authentication"):
        server.step(b"n,,n=nobody,r=abcdefgh")


# ---------------------------------------------------------------------------- PLAIN


def plain(mechanisms, message: bytes):
    return mechanisms.start("PLAIN").step(message)


def test_plain_success(mechanisms):
    server = mechanisms.start("PLAIN")
    assert server.step(b"\x00alice\x00alice-secret") == (b"", True)
    assert server.principal == "User:alice"
    server = mechanisms.start("PLAIN")
    assert server.step(b"admin\x00admin\x00admin-secret") == (b"", True)  # authzid = authcid
    assert server.principal == "User:admin"


@pytest.mark.parametrize("message, error", [
    (b"\x00alice\x00wrong", "Authentication failed: Invalid username or password"),
    (b"\x00mallory\x00alice-secret", "Authentication failed: Invalid username or password"),
    (b"\x00admin\x00admin-secret\x00extra", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"\x00\x00pw", "Authentication failed: username not specified"),
    (b"\x00alice\x00", "Authentication failed: password not specified"),
    (b"admin\x00alice\x00alice-secret",
     "Authentication failed: Client requested an authorization id that is different from username"),
])
def test_plain_failures(mechanisms, message, error):
    with pytest.raises(SaslAuthenticationFailed) as exc:
        plain(mechanisms, message)
    assert str(exc.value) == error
    assert b"secret" not in exc.value.detail.encode()


def test_unsupported_and_unconfigured_mechanisms(tmp_path):
    m = SaslServerMechanisms(enabled=("PLAIN", "SCRAM-SHA-256"), plain_users={"u": "p"})
    assert m.enabled_mechanisms == ("PLAIN",)  # SCRAM enabled but no credential store
    for name in ("SCRAM-SHA-256", "GSSAPI", "plain", "OAUTHBEARER"):
        with pytest.raises(UnsupportedSaslMechanism):
            m.start(name)


# ---------------------------------------------------------------------------- JAAS


def test_jaas_users_as_kafka_writes_them():
    assert plain_users_from_jaas(JAAS) == {"admin": "admin-secret", "alice": "alice-secret"}
    # Shaded module, comments, single quotes, escapes, several lines, other modules ignored.
    text = ("com.example.Other required user_x=\"no\";\n"
            f"kafkashaded.{PLAIN_MODULE} REQUIRED /* broker */ username='admin' password=\"a\\\"b\"\n"
            "  user_bob='b;ob=\\'s' // trailing\n  user_c-d=bare.word_1;")
    assert plain_users_from_jaas(text) == {"bob": "b;ob='s", "c-d": "bare.word_1"}
    assert [e.control_flag for e in parse_jaas_entries(text)] == ["required", "required"]
    for bad in ("", f"{PLAIN_MODULE} required user_a=\"x\"", f"{PLAIN_MODULE} mandatory;",
                f"{PLAIN_MODULE} required user_a=;", "com.example.Other required;"):
        with pytest.raises(JaasConfigError):
            plain_users_from_jaas(bad)


# ---------------------------------------------------------------------------- OAUTHBEARER


def unsecured_token(claims: dict, header: dict | None = None) -> str:
    def part(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part(header or {'alg': 'none'})}.{part(claims)}."


def oauth_message(token: str, authzid: str = "", extensions: str = "") -> bytes:
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}\x01auth=Bearer {token}\x01{extensions}\x01".encode()


def test_oauthbearer_success(mechanisms):
    exp_s = NOW_MS / 1000 + 3600
    server = mechanisms.start("OAUTHBEARER")
    token = unsecured_token({"sub": "carol", "iat": NOW_MS / 1000 - 10, "exp": exp_s})
    assert server.step(oauth_message(token, extensions="traceId=42\x01")) == (b"", True)
    assert server.principal == "User:carol" and server.session_expiry_ms == int(exp_s * 1000)
    assert server.extensions == {"traceId": "42"}
    assert mechanisms.start("OAUTHBEARER").step(oauth_message(token, authzid="carol"))[1]


@pytest.mark.parametrize("claims, header", [
    ({"sub": "carol", "exp": NOW_MS / 1000 - 1}, None),  # expired
    ({"sub": "carol"}, None),  # no exp
    ({"exp": NOW_MS / 1000 + 60}, None),  # no principal
    ({"sub": "carol", "exp": NOW_MS / 1000 + 60, "iat": NOW_MS / 1000 + 30}, None),  # issued in the future
    ({"sub": "carol", "exp": NOW_MS / 1000 + 60}, {"alg": "HS256"}),  # not unsecured
])
def test_oauthbearer_invalid_token(mechanisms, claims, header):
    server = mechanisms.start("OAUTHBEARER")
    assert server.step(oauth_message(unsecured_token(claims, header))) == (INVALID_TOKEN_RESPONSE.encode(), False)
    with pytest.raises(SaslAuthenticationFailed) as exc:
        server.step(b"\x01")
    assert str(exc.value) == INVALID_TOKEN_RESPONSE and "invalid token" in exc.value.detail


def test_oauthbearer_malformed_and_authzid_mismatch(mechanisms):
    token = unsecured_token({"sub": "carol", "exp": NOW_MS / 1000 + 60})
    for message in (b"nonsense", f"n,,auth=Bearer {token}".encode(), b"n,,\x01auth=Basic abc\x01\x01",
                    (token + ".").encode()):
        with pytest.raises(SaslAuthenticationFailed, match="invalid credentials with SASL mechanism OAUTHBEARER"):
            mechanisms.start("OAUTHBEARER").step(message)
    with pytest.raises(SaslAuthenticationFailed, match=r"authorization id \(dave\).*\(carol\)"):
        mechanisms.start("OAUTHBEARER").step(oauth_message(token, authzid="dave"))


def test_oauthbearer_validator_options():
    v = UnsecuredJwsValidator.from_jaas(
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredValidatorPrincipalClaimName="user" unsecuredValidatorRequiredScope="read write" '
        'unsecuredValidatorAllowableClockSkewMs="5000";')
    assert v == UnsecuredJwsValidator("user", "scope", ("read", "write"), 5000)
    exp = NOW_MS / 1000 - 2  # expired 2 s ago, within the 5 s skew
    assert v.validate(unsecured_token({"user": "eve", "exp": exp, "scope": "read write x"}), NOW_MS) == (
        "eve", int(exp * 1000))
    m = SaslServerMechanisms(oauthbearer=v, clock=lambda: NOW_MS)
    assert m.start("OAUTHBEARER").step(oauth_message(unsecured_token({"user": "eve", "exp": exp, "scope": "read"})))[
        0] == INVALID_TOKEN_RESPONSE.encode()
