"""Fuzz the consumer protocol's embedded bytes a client sends the group coordinator: the
ConsumerProtocolSubscription in a JoinGroup's protocol metadata and the ConsumerProtocolAssignment
in a leader's SyncGroup (``consumer_protocol.parse_subscription`` / ``parse_assignment``, read when a
classic member joins a KIP-848 group or a classic group is converted; ``state.consumer_subscription_topics``
for OffsetDelete's subscription check).

    .venv/bin/python -m tests.fuzz.fuzz_consumer_protocol -runs=1000000
    .venv/bin/python -m tests.fuzz.fuzz_consumer_protocol crash-file          # replay one input

A bug is any exception (each parser answers None for bytes it cannot read), or an assignment that
parses but does not survive ``encode_assignment`` and a second parse unchanged. Memory and time are
bounded by the runner's -rss_limit_mb and -timeout (a count the bytes cannot hold must not allocate).
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["oncelog.protocol.consumer_protocol", "oncelog.protocol.internal_records"]):
    from oncelog.protocol import consumer_protocol as cm
    from oncelog.groups.state import consumer_subscription_topics

from ._runner import main as run


def test_one_input(data: bytes) -> None:
    got = cm.parse_subscription(data)
    if got is not None:
        version, topics, owned = got
        assert version >= 0 and all(isinstance(t, str) for t in topics), got
    consumer_subscription_topics(data)
    parts = cm.parse_assignment(data)
    if parts is not None:
        again = cm.parse_assignment(cm.encode_assignment(parts, 0))
        assert again == parts, (parts, again)


if __name__ == "__main__":
    run("consumer_protocol", test_one_input, [])
    sys.exit(0)
