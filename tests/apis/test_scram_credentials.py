"""AlterUserScramCredentials (51) and DescribeUserScramCredentials (50) v0 at the handler level:
kio's requests in, kio's responses out, on an in-process broker; the credentials survive a
reopen of the broker on the same data dir and authenticate through the SCRAM server mechanism."""

from __future__ import annotations

import os

import scramp

from oncelog.security.sasl import SaslServerMechanisms
from oncelog.security.scram import salted_password

from .harness import E, request_module, run

ALTER, DESCRIBE = 51, 50


def alter_request(upsertions=(), deletions=()):
    m = request_module(ALTER, 0)
    return m.AlterUserScramCredentialsRequest(
        deletions=tuple(m.ScramCredentialDeletion(name=n, mechanism=mech) for n, mech in deletions),
        upsertions=tuple(m.ScramCredentialUpsertion(name=n, mechanism=mech, iterations=i, salt=salt,
                                                    salted_password=salted_password(mech, pw, salt, i))
                         for n, mech, i, pw, salt in upsertions))


def describe_request(users):
    m = request_module(DESCRIBE, 0)
    return m.DescribeUserScramCredentialsRequest(
        users=None if users is None else tuple(m.UserName(name=u) for u in users))


def test_alter_describe_and_authenticate(tmp_path):
    salt = os.urandom(16)

    async def scenario(api):
        resp = await api.call(ALTER, 0, alter_request(upsertions=[
            ("alice", 1, 8192, "alice-pw", salt), ("bob", 2, 4096, "bob-pw", salt), ("eve", 1, 100, "x", salt)]))
        assert {r.user: (r.error_code, r.error_message) for r in resp.results} == {
            "alice": (E.none, None), "bob": (E.none, None), "eve": (E.unacceptable_credential, "Too few iterations")}
        resp = await api.call(DESCRIBE, 0, describe_request(None))
        assert resp.error_code == E.none
        assert {r.user: [(c.mechanism, c.iterations) for c in r.credential_infos] for r in resp.results} == {
            "alice": [(1, 8192)], "bob": [(2, 4096)]}
        resp = await api.call(DESCRIBE, 0, describe_request(["alice", "zed"]))
        assert {r.user: (r.error_code, r.error_message) for r in resp.results} == {
            "alice": (E.none, None),
            "zed": (E.resource_not_found, "Attempt to describe a user credential that does not exist: zed")}
        resp = await api.call(ALTER, 0, alter_request(deletions=[("bob", 2), ("zed", 1)]))
        assert {r.user: r.error_code for r in resp.results} == {"bob": E.none, "zed": E.resource_not_found}

    run(tmp_path, scenario)

    async def after_restart(api):
        resp = await api.call(DESCRIBE, 0, describe_request([]))
        assert [(r.user, [(c.mechanism, c.iterations) for c in r.credential_infos]) for r in resp.results] == [
            ("alice", [(1, 8192)])]
        # The stored credential authenticates the password given, and only it.
        mechanisms = SaslServerMechanisms(scram_credentials=api.broker.scram_credentials)
        for password, ok in (("alice-pw", True), ("wrong", False)):
            client = scramp.ScramClient(["SCRAM-SHA-256"], "alice", password)
            server = mechanisms.start("SCRAM-SHA-256")
            client.set_server_first(server.step(client.get_client_first().encode())[0].decode())
            try:
                final, done = server.step(client.get_client_final().encode())
            except Exception:
                assert not ok
            else:
                assert ok and done and server.principal == "User:alice"
                client.set_server_final(final.decode())

    run(tmp_path, after_restart)


def test_duplicates_and_unknown_mechanism(tmp_path):
    salt = b"s" * 16

    async def scenario(api):
        resp = await api.call(ALTER, 0, alter_request(
            upsertions=[("u", 1, 4096, "p", salt), ("u", 2, 4096, "p", salt), ("w", 1, 16385, "p", salt)],
            deletions=[("v", 3)]))
        assert {r.user: (r.error_code, r.error_message) for r in resp.results} == {
            "v": (E.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
            "u": (E.duplicate_resource, "A user credential cannot be altered twice in the same request"),
            "w": (E.unacceptable_credential, "Too many iterations")}
        resp = await api.call(DESCRIBE, 0, describe_request(["u", "u"]))
        assert [(r.user, r.error_code) for r in resp.results] == [("u", E.duplicate_resource)]
        assert (await api.call(DESCRIBE, 0, describe_request(None))).results == ()

    run(tmp_path, scenario)


def test_api_versions_advertises_both(tmp_path):
    from oncelog.apis import HANDLERS

    assert (HANDLERS[ALTER].MIN_VERSION, HANDLERS[ALTER].MAX_VERSION) == (0, 0)
    assert (HANDLERS[DESCRIBE].MIN_VERSION, HANDLERS[DESCRIBE].MAX_VERSION) == (0, 0)
