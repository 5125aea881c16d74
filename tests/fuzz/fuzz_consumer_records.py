"""Fuzz the decoders of ``__consumer_offsets`` records that replay reads from disk:
``records.decode_key`` and ``consumer_records.decode_consumer_value`` (consumer (KIP-848) groups).

    .venv/bin/python -m tests.fuzz.fuzz_consumer_records -runs=1000000
    .venv/bin/python -m tests.fuzz.fuzz_consumer_records crash-file          # replay one input
    .venv/bin/python -m tests.fuzz.fuzz_consumer_records --write-seeds       # rewrite the seed corpus

The input's first byte picks what the rest is: a key (``decode_key``), or the value of one of the
seven consumer group key types. The seeds (tests/fuzz/corpus/consumer_records) are records Apache
Kafka 4.4 wrote (tests/groups/test_consumer_records.py), so mutations start from real layouts.

A bug is: any exception but ValueError (hostile bytes must never raise anything else); a key
that decodes but does not re-encode to a prefix of its bytes (the rest ignored, as Kafka does);
a value that decodes but whose re-encoding does not decode to the same value, or re-encodes to
other bytes a second time (the encoder must be a fixed point on what the decoder yields). Memory
and time are bounded by the runner's -rss_limit_mb and -timeout: a count the record cannot hold
must be refused before anything is allocated.
"""

from __future__ import annotations

import os
import sys

import atheris

with atheris.instrument_imports(include=["oncelog.groups.consumer_records", "oncelog.groups.records",
                                         "oncelog.protocol.internal_records"]):
    from oncelog.groups import consumer_records as cr
    from oncelog.groups.records import decode_key, encode_key

from ._runner import main as run

SEEDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "consumer_records")

# the key a value is decoded for, by the input's first byte (0: the input is a key)
KEYS = [
    None,
    cr.ConsumerGroupMetadataKey("g"),
    cr.ConsumerGroupPartitionMetadataKey("g"),
    cr.ConsumerGroupMemberMetadataKey("g", "m"),
    cr.ConsumerGroupTargetAssignmentMetadataKey("g"),
    cr.ConsumerGroupTargetAssignmentMemberKey("g", "m"),
    cr.ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
    cr.ConsumerGroupRegularExpressionKey("g", "r"),
]
_BY_CLASS = {type(k): i for i, k in enumerate(KEYS) if k is not None}


def check_key(data: bytes) -> None:
    try:
        key = decode_key(data)
    except ValueError:
        return
    if isinstance(key, (cr.CONSUMER_KEYS, cr.ConsumerGroupPartitionMetadataKey)):
        encoded = encode_key(key)
        if data[:len(encoded)] != encoded:
            raise AssertionError(f"{key!r} re-encodes to {encoded.hex()}, not a prefix of {data.hex()}")


def check_value(key, data: bytes) -> None:
    try:
        value = cr.decode_consumer_value(key, data)
    except ValueError:
        return
    if isinstance(key, cr.ConsumerGroupPartitionMetadataKey):
        return  # decoded only, never written
    once = cr.encode_consumer_value(value)
    again = cr.decode_consumer_value(key, once)
    if again != value:
        raise AssertionError(f"{value!r} re-encoded decodes as {again!r}")
    if cr.encode_consumer_value(again) != once:
        raise AssertionError(f"{value!r}: a second encoding differs from the first")


def test_one_input(data: bytes) -> None:
    if not data:
        return
    key = KEYS[data[0] % len(KEYS)]
    if key is None:
        check_key(data[1:])
    else:
        check_value(key, data[1:])


def write_seeds() -> None:
    """The seed corpus: every golden record of the unit tests, its key and its value."""
    from tests.groups.test_consumer_records import KAFKA_RECORDS

    os.makedirs(SEEDS, exist_ok=True)
    for name in os.listdir(SEEDS):
        os.remove(os.path.join(SEEDS, name))
    for i, (key, key_hex, _value, value_hex) in enumerate(KAFKA_RECORDS):
        with open(os.path.join(SEEDS, f"{i:02d}-key.bin"), "wb") as f:
            f.write(b"\x00" + bytes.fromhex(key_hex))
        with open(os.path.join(SEEDS, f"{i:02d}-value.bin"), "wb") as f:
            f.write(bytes([_BY_CLASS[type(key)]]) + bytes.fromhex(value_hex))


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-seeds"]:
        write_seeds()
        sys.exit(0)
    run("consumer_records", test_one_input, [SEEDS])
    sys.exit(0)
