"""Every SASL mechanism takes hostile bytes from the network before the client is known: any
sequence of steps with any bytes ends in an answer or SaslAuthenticationFailed — never another
exception, never a principal the bytes did not prove."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oncelog.security.sasl import (
    SaslAuthenticationFailed, SaslServerMechanisms, UnsecuredJwsValidator, plain_users_from_jaas,
)
from oncelog.security.scram import ScramCredentialStore

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_alice="alice-secret";')


@pytest.fixture(scope="module")
def mechanisms(tmp_path_factory):
    store = ScramCredentialStore(str(tmp_path_factory.mktemp("scram")))
    store.set_password("alice", "SCRAM-SHA-256", "alice-pw", 4096)
    store.set_password("alice", "SCRAM-SHA-512", "alice-pw", 4096)
    return SaslServerMechanisms(plain_users=plain_users_from_jaas(JAAS), scram_credentials=store,
                                oauthbearer=UnsecuredJwsValidator(), clock=lambda: 1_700_000_000_000)


# Bytes that look like each mechanism's messages, mixed with noise, so the fuzzer gets past the
# first check of each parser.
_PREFIXES = [b"", b"n,,n=alice,r=", b"c=biws,r=", b"\0alice\0", b"n,,\x01auth=Bearer ", b"\x01", b"p=", b"n,a=x,"]
chunks = st.builds(lambda prefix, tail: prefix + tail, st.sampled_from(_PREFIXES), st.binary(max_size=120))


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]), st.lists(chunks, max_size=4))
def test_any_bytes_end_in_an_answer_or_a_refusal(mechanisms, name, steps):
    mechanism = mechanisms.start(name)
    for data in steps:
        try:
            answer, done = mechanism.step(data)
        except SaslAuthenticationFailed:
            return
        assert isinstance(answer, bytes)
        if done:
            # Only a PLAIN message with the right password, or an unsecured token (which names
            # its principal by design), can complete from fuzzed bytes.
            assert name in ("PLAIN", "OAUTHBEARER"), (name, steps)
            if name == "PLAIN":
                assert b"alice-secret" in data or b"admin-secret" in data
            return
