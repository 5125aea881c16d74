"""SCRAM credentials managed with confluent-kafka's AdminClient (KIP-554) against a real broker
process: upsert, describe, delete, the errors Kafka answers, and after a restart the credential
still there and authenticating the password given (checked in-process with scramp's client
against the broker's credential store: SASL listeners are not wired into the server yet)."""

from __future__ import annotations

import pytest
import scramp
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion,
)

from oncelog.security.sasl import SaslAuthenticationFailed, SaslServerMechanisms
from oncelog.security.scram import ScramCredentialStore

pytestmark = pytest.mark.e2e  # starts processes

TIMEOUT = 15


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def describe(client, users: list[str]) -> dict:
    """{user: {mechanism name: iterations}} or {user: KafkaException's error code name}."""
    out = {}
    for user, fut in client.describe_user_scram_credentials(users, request_timeout=TIMEOUT).items():
        try:
            out[user] = {i.mechanism.name: i.iterations for i in fut.result().scram_credential_infos}
        except KafkaException as exc:
            out[user] = exc.args[0].name()
    return out


def alter(client, alterations) -> dict:
    out = {}
    for user, fut in client.alter_user_scram_credentials(alterations, request_timeout=TIMEOUT).items():
        try:
            fut.result()
            out[user] = "OK"
        except KafkaException as exc:
            out[user] = exc.args[0].name()
    return out


def authenticates(store: ScramCredentialStore, mechanism: str, user: str, password: str) -> bool:
    server = SaslServerMechanisms(scram_credentials=store).start(mechanism)
    client = scramp.ScramClient([mechanism], user, password)
    try:
        first, _ = server.step(client.get_client_first().encode())
        client.set_server_first(first.decode())
        final, done = server.step(client.get_client_final().encode())
    except SaslAuthenticationFailed:
        return False
    client.set_server_final(final.decode())  # the server proved it holds the server key
    return done and server.principal == f"User:{user}"


def test_scram_credentials_with_confluent_admin(broker_factory):
    broker = broker_factory()
    client = admin(broker)
    sha256 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
    sha512 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    assert alter(client, [UserScramCredentialUpsertion("alice", sha256, b"alice-pw"),
                          UserScramCredentialUpsertion("bob", sha512, b"bob-pw", b"explicit-salt")]) == {
        "alice": "OK", "bob": "OK"}
    assert alter(client, [UserScramCredentialUpsertion("alice", sha512, b"alice-pw-512")]) == {"alice": "OK"}

    assert describe(client, ["alice", "bob", "nobody"]) == {
        "alice": {"SCRAM_SHA_256": 8192, "SCRAM_SHA_512": 4096}, "bob": {"SCRAM_SHA_512": 4096},
        "nobody": "RESOURCE_NOT_FOUND"}
    everyone = client.describe_user_scram_credentials(request_timeout=TIMEOUT).result()
    assert {u: {i.mechanism.name for i in d.scram_credential_infos} for u, d in everyone.items()} == {
        "alice": {"SCRAM_SHA_256", "SCRAM_SHA_512"}, "bob": {"SCRAM_SHA_512"}}

    # Kafka's errors: too few / too many iterations, a missing credential, a user twice.
    assert alter(client, [UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256,
                                                                                    1000), b"pw"),
                          UserScramCredentialUpsertion("dan", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256,
                                                                                  20000), b"pw"),
                          UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)]) == {
        "carol": "UNACCEPTABLE_CREDENTIAL", "dan": "UNACCEPTABLE_CREDENTIAL", "bob": "RESOURCE_NOT_FOUND"}
    assert alter(client, [UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512),
                          UserScramCredentialUpsertion("bob", sha256, b"again")]) == {"bob": "DUPLICATE_RESOURCE"}
    assert alter(client, [UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)]) == {"bob": "OK"}
    assert describe(client, ["bob"]) == {"bob": "RESOURCE_NOT_FOUND"}

    # A restart keeps the credentials; the file holds no password; the stored credential
    # authenticates the password the admin client gave, and no other.
    broker.stop()
    broker.start()
    assert describe(admin(broker), ["alice"]) == {"alice": {"SCRAM_SHA_256": 8192, "SCRAM_SHA_512": 4096}}
    store = ScramCredentialStore(broker.data_dir)
    with open(store.path) as f:
        assert "alice-pw" not in f.read()
    assert authenticates(store, "SCRAM-SHA-256", "alice", "alice-pw")
    assert authenticates(store, "SCRAM-SHA-512", "alice", "alice-pw-512")
    assert not authenticates(store, "SCRAM-SHA-256", "alice", "alice-pw-512")
    assert not authenticates(store, "SCRAM-SHA-512", "bob", "bob-pw")
