"""The safe default: a listener beyond loopback must authenticate its clients
unless ``oncelog.allow.unauthenticated.listeners=true``. A SASL listener offering OAUTHBEARER
without ``sasl.oauthbearer.jwks.endpoint.url`` takes unsecured tokens (alg none): the client
writes its own principal (``sub=admin``, a super user), so it authenticates no one — the broker
refuses to start, naming the listener and the setting, or with the setting starts and warns. Signed
tokens (a JWKS), SCRAM or PLAIN alone, and loopback stay as they were."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from oncelog.cli import build_parser
from oncelog.config.serve_options import ServeConfigError, build_broker_config, settings_from_args
from oncelog.process import BrokerProcess
from tests.helpers import free_port

OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
ALLOW = "oncelog.allow.unauthenticated.listeners=true"


def build(*overrides: str):
    args = ["serve", "--data-dir", "d"] + [a for o in overrides for a in ("--override", o)]
    return build_broker_config(settings_from_args(build_parser().parse_args(args)))


def sasl_listener(host: str, mechanisms: str, *more: str, name: str = "EXTERNAL", protocol: str = "SASL_PLAINTEXT"):
    lower = name.lower()
    return (f"listeners=PLAINTEXT://127.0.0.1:9092,{name}://{host}:9094",
            f"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,{name}:{protocol}",
            f"listener.name.{lower}.sasl.enabled.mechanisms={mechanisms}",
            f"listener.name.{lower}.oauthbearer.sasl.jaas.config={OAUTH}",
            f"listener.name.{lower}.scram-sha-512.sasl.jaas.config={SCRAM}", *more)


@pytest.fixture
def jwks(tmp_path):
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": []}))
    return path.as_uri()


@pytest.mark.parametrize("mechanisms", ["OAUTHBEARER", "SCRAM-SHA-512,OAUTHBEARER"])
@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "broker.example.com"])
def test_unsecured_oauthbearer_beyond_loopback_is_refused_unless_allowed(host, mechanisms):
    with pytest.raises(ServeConfigError) as exc:
        build(*sasl_listener(host, mechanisms))
    message = str(exc.value)
    assert f"listener EXTERNAL on {host}:9094" in message and "unsecured OAUTHBEARER" in message
    assert "oncelog.allow.unauthenticated.listeners=true" in message
    assert "listener.name.external.oauthbearer.sasl.oauthbearer.jwks.endpoint.url" in message
    config, notes = build(*sasl_listener(host, mechanisms), ALLOW)
    warnings = [n for n in notes if n.startswith("WARNING: ")]
    assert len(warnings) == 1 and "listener EXTERNAL" in warnings[0] and "unsecured OAUTHBEARER" in warnings[0]


def test_with_an_authorizer_the_message_says_super_users_can_be_claimed():
    with pytest.raises(ServeConfigError, match=r"names its own principal, User:admin included \(a super user\)"):
        build(*sasl_listener("0.0.0.0", "OAUTHBEARER"), "super.users=User:admin",
              "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer")


def test_mtls_does_not_make_unsecured_tokens_authenticate():
    """SASL_SSL with ssl.client.auth=required: the principal is still the token's, which the
    client writes."""
    with pytest.raises(ServeConfigError, match="unsecured OAUTHBEARER"):
        build(*sasl_listener("0.0.0.0", "OAUTHBEARER", "ssl.keystore.location=/k.pem", "ssl.client.auth=required",
                             "ssl.truststore.location=/ca.pem", protocol="SASL_SSL"))


@pytest.mark.parametrize("listener", [
    lambda jwks: sasl_listener("0.0.0.0", "OAUTHBEARER",
                               f"listener.name.external.oauthbearer.sasl.oauthbearer.jwks.endpoint.url={jwks}"),
    lambda jwks: sasl_listener("0.0.0.0", "OAUTHBEARER,SCRAM-SHA-512", f"sasl.oauthbearer.jwks.endpoint.url={jwks}"),
    lambda jwks: sasl_listener("0.0.0.0", "SCRAM-SHA-512"),
    lambda jwks: sasl_listener("127.0.0.1", "OAUTHBEARER"),
    lambda jwks: sasl_listener("[::1]", "OAUTHBEARER,SCRAM-SHA-512"),
])
def test_what_authenticates_or_stays_on_loopback_starts_without_a_warning(listener, jwks):
    _, notes = build(*listener(jwks))
    assert not any(n.startswith("WARNING:") for n in notes), notes


@pytest.mark.e2e
def test_oncelog_serve_refuses_to_start_and_with_consent_warns(tmp_path):
    port = free_port()
    overrides = sasl_listener("0.0.0.0", "OAUTHBEARER")
    overrides = (f"listeners=PLAINTEXT://127.0.0.1:0,EXTERNAL://0.0.0.0:{port}",) + overrides[1:]
    args = [a for o in overrides for a in ("--override", o)]
    done = subprocess.run([sys.executable, "-m", "oncelog", "serve", "--data-dir", str(tmp_path / "refused"), *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done
    assert f"listener EXTERNAL on 0.0.0.0:{port}" in done.stderr and "unsecured OAUTHBEARER" in done.stderr
    assert "oncelog.allow.unauthenticated.listeners=true" in done.stderr
    b = BrokerProcess(str(tmp_path / "allowed"), extra_args=args + ["--override", ALLOW])
    b.start()
    try:
        log = open(b.log_path, errors="replace").read()
        assert any(" WARNING " in line and "listener EXTERNAL" in line and "unsecured OAUTHBEARER" in line
                   for line in log.splitlines()), log
    finally:
        b.kill()
