"""The SCRAM credential store: Kafka's validation of AlterUserScramCredentials and
DescribeUserScramCredentials, the keys derived from the salted password (RFC 5802), and
persistence across a new store on the same data dir."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import scramp
from kio.schema.errors import ErrorCode as E

from oncelog.security.scram import (
    FILE_NAME, SCRAM_SHA_256, SCRAM_SHA_512, ScramCredentialStore, credential_from_salted_password, salted_password,
)


@dataclass
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass
class Deletion:
    name: str
    mechanism: int


def upsertion(name, mechanism=SCRAM_SHA_256, password="pw", iterations=8192, salt=b"salt-salt"):
    salted = salted_password(mechanism, password, salt, iterations) if mechanism in (1, 2) else b"x" * 32
    return Upsertion(name, mechanism, iterations, salt, salted)


def results(rs):
    return {r.user: (r.error_code, r.error_message) for r in rs}


def test_keys_are_rfc5802_and_match_scramp(tmp_path):
    for mechanism, name in ((SCRAM_SHA_256, "SCRAM-SHA-256"), (SCRAM_SHA_512, "SCRAM-SHA-512")):
        salt = os.urandom(24)
        salted = salted_password(mechanism, "secret", salt, 4096)
        c = credential_from_salted_password(mechanism, salt, salted, 4096)
        assert (c.salt, c.stored_key, c.server_key, c.iterations) == scramp.ScramMechanism(name).make_auth_info(
            "secret", 4096, salt)
        assert "hidden" in repr(c) and salt.hex() not in repr(c)


def test_upsert_describe_delete_and_restart(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    assert results(store.alter((), [upsertion("alice"), upsertion("bob", SCRAM_SHA_512, iterations=4096)])) == {
        "alice": (E.none, None), "bob": (E.none, None)}
    assert results(store.alter((), [upsertion("alice", SCRAM_SHA_512, iterations=16384)])) == {"alice": (E.none, None)}
    described = {r.user: (r.error_code, r.credential_infos) for r in store.describe(None)}
    assert described == {"alice": (E.none, ((1, 8192), (2, 16384))), "bob": (E.none, ((2, 4096),))}
    # Persisted: a new store on the same dir sees the same; the file holds no password.
    again = ScramCredentialStore(str(tmp_path))
    assert {r.user: r.credential_infos for r in again.describe([])} == {u: i for u, (_, i) in described.items()}
    assert again.credential("alice", "SCRAM-SHA-256") == store.credential("alice", SCRAM_SHA_256)
    text = (tmp_path / FILE_NAME).read_text()
    assert "pw" not in text and json.loads(text)["version"] == 1
    assert salted_password(SCRAM_SHA_256, "pw", b"salt-salt", 8192).hex() not in text
    # Delete one mechanism, then the other: the user disappears.
    assert results(again.alter([Deletion("alice", SCRAM_SHA_256)], ())) == {"alice": (E.none, None)}
    assert results(again.alter([Deletion("alice", SCRAM_SHA_512)], ())) == {"alice": (E.none, None)}
    assert ScramCredentialStore(str(tmp_path)).users() == ["bob"]


def test_kafka_validation_errors(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    store.alter((), [upsertion("carol")])
    got = results(store.alter(
        [Deletion("carol", SCRAM_SHA_512), Deletion("", SCRAM_SHA_256), Deletion("dave", 7)],
        [upsertion("few", iterations=4095), upsertion("many", iterations=16385), upsertion("mech", mechanism=0),
         upsertion("", SCRAM_SHA_256), upsertion("nosalt", salt=b""), upsertion("ok")]))
    assert got == {
        "carol": (E.resource_not_found, "Attempt to delete a user credential that does not exist"),
        "": (E.unacceptable_credential, "Username must not be empty"),
        "dave": (E.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        "few": (E.unacceptable_credential, "Too few iterations"),
        "many": (E.unacceptable_credential, "Too many iterations"),
        "mech": (E.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        "nosalt": (E.unacceptable_credential, "Salt must not be empty"),
        "ok": (E.none, None),
    }
    assert store.users() == ["carol", "ok"]


def test_a_user_named_twice_is_duplicate_and_nothing_of_it_applies(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    store.alter((), [upsertion("erin")])
    dup = "A user credential cannot be altered twice in the same request"
    got = results(store.alter([Deletion("erin", SCRAM_SHA_256)],
                              [upsertion("erin", SCRAM_SHA_512), upsertion("frank"), upsertion("frank", SCRAM_SHA_512),
                               upsertion("frank")]))
    assert got == {"erin": (E.duplicate_resource, dup), "frank": (E.duplicate_resource, dup)}
    assert [(r.user, r.credential_infos) for r in store.describe(None)] == [("erin", ((1, 8192),))]
    # A user whose first item already failed keeps that error (Kafka skips it afterwards).
    got = results(store.alter([Deletion("gina", SCRAM_SHA_256)], [upsertion("gina")]))
    assert got == {"gina": (E.resource_not_found, "Attempt to delete a user credential that does not exist")}


def test_describe_errors(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    store.alter((), [upsertion("hal")])
    got = {r.user: (r.error_code, r.error_message, r.credential_infos)
           for r in store.describe(["hal", "ivy", "jo", "jo"])}
    assert got == {
        "hal": (E.none, None, ((1, 8192),)),
        "ivy": (E.resource_not_found, "Attempt to describe a user credential that does not exist: ivy", ()),
        "jo": (E.duplicate_resource, "Cannot describe SCRAM credentials for the same user twice in a single request: jo",
               ()),
    }


def test_set_password(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    assert store.set_password("kim", "SCRAM-SHA-512", "pw", 4096).error_code == E.none
    assert store.set_password("kim", "SCRAM-SHA-1", "pw").error_code == E.unsupported_sasl_mechanism
    assert store.set_password("kim", "SCRAM-SHA-256", "pw", 100).error_code == E.unacceptable_credential
    assert [r.credential_infos for r in store.describe(["kim"])] == [((2, 4096),)]
