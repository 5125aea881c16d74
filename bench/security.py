"""Security protocols of the broker under test: the same oncelog broker over PLAINTEXT, SSL,
SASL_PLAINTEXT or SASL_SSL, side by side in one run ("produce/consume throughput over
SASL_SSL vs PLAINTEXT in one bench run").

A target ``oncelog-<fsync>+<protocol>`` (``+ssl``, ``+sasl_plaintext``, ``+sasl_ssl``) starts its
own broker process with two listeners: ``PLAINTEXT://127.0.0.1:0`` (only to create the SCRAM user
before the run; no cell uses it) and ``<PROTOCOL>://127.0.0.1:<free port>``, which every client
of the target's cells uses — librdkafka producers, consumers and admin, and the protocol-level
client of the ``wire-*`` modes (bench/wireload.py speaks TLS and SASL too).

Invariants:

- Certificates are made at run time (``trustme``): one CA, one broker certificate for
  ``127.0.0.1``/``localhost``, written to ``<work dir>/tls``; clients verify the broker against
  that CA (hostname checked).
- SASL is SCRAM-SHA-512 (the mechanism Kafka recommends with SASL_SSL), user ``bench``; the
  credential is created with AlterUserScramCredentials (4096 iterations, Kafka's default) over the
  PLAINTEXT listener (no authorizer), so every SASL connection of a cell does the full exchange.
- No authorizer: the difference between targets is transport and authentication only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

PROTOCOLS = {"plaintext": "PLAINTEXT", "ssl": "SSL", "sasl_plaintext": "SASL_PLAINTEXT", "sasl_ssl": "SASL_SSL"}
MECHANISM = "SCRAM-SHA-512"
USER, PASSWORD = "bench", "bench-secret"
SCRAM_ITERATIONS = 4096


@dataclass(frozen=True)
class Certificates:
    ca: str  # PEM file of the CA (clients' ssl.ca.location)
    keystore: str  # PEM file with the broker's key and certificate chain (ssl.keystore.location)


def make_certificates(directory: str) -> Certificates:
    """A CA and a broker certificate for 127.0.0.1/localhost, written under ``directory``
    (made once per run and shared by every TLS target)."""
    import trustme

    os.makedirs(directory, exist_ok=True)
    ca = trustme.CA()
    paths = Certificates(os.path.join(directory, "ca.pem"), os.path.join(directory, "broker.pem"))
    ca.cert_pem.write_to_path(paths.ca)
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(paths.keystore)
    return paths


def is_tls(security: str) -> bool:
    return security in ("ssl", "sasl_ssl")


def is_sasl(security: str) -> bool:
    return security.startswith("sasl_")


def broker_args(security: str, port: int, certs: Certificates | None) -> list[str]:
    """``oncelog serve`` arguments for a broker whose clients use ``security`` on ``port``;
    the PLAINTEXT listener comes first, so it is the address the broker prints at start."""
    if security == "plaintext":
        return []
    name = security  # the listener's name is its protocol (Kafka's default map)
    args = ["--override", f"listeners=PLAINTEXT://127.0.0.1:0,{PROTOCOLS[security]}://127.0.0.1:{port}"]
    if is_tls(security):
        args += ["--override", f"ssl.keystore.location={certs.keystore}"]
    if is_sasl(security):
        args += ["--override", f"listener.name.{name}.sasl.enabled.mechanisms={MECHANISM}"]
    return args


def client_config(security: str, certs: Certificates | None) -> dict:
    """The client settings (confluent-kafka's names, which bench/wireload.py reads as well) of a
    client of a ``security`` listener."""
    if security == "plaintext":
        return {}
    conf = {"security.protocol": PROTOCOLS[security]}
    if is_tls(security):
        conf["ssl.ca.location"] = certs.ca
    if is_sasl(security):
        conf.update({"sasl.mechanism": MECHANISM, "sasl.username": USER, "sasl.password": PASSWORD})
    return conf


def create_scram_user(plaintext_bootstrap: str, timeout: float = 30.0) -> None:
    """The ``bench`` user's SCRAM-SHA-512 credential, over the broker's PLAINTEXT listener."""
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)

    admin = AdminClient({"bootstrap.servers": plaintext_bootstrap})
    upsert = UserScramCredentialUpsertion(USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS),
                                          PASSWORD.encode())
    for fut in admin.alter_user_scram_credentials([upsert]).values():
        fut.result(timeout)
