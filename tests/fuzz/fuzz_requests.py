"""Fuzz every request decode: ``codec.peek_header`` + ``codec.decode_request``.

    .venv/bin/python -m tests.fuzz.fuzz_requests -runs=1000000      # from the seed corpus
    .venv/bin/python -m tests.fuzz.fuzz_requests crash-file          # replay one input

An input is a request frame without its size prefix, as the broker hands it to the codec. A
frame whose (api_key, api_version) the broker does not serve is re-pointed, by a hash of the
two, at one it does (oncelog.apis HANDLERS, MIN..MAX_VERSION), so every input reaches a decoder
and every served version is fuzzed, including those no client in the corpus sends.

A bug is any exception other than ``DecodeError``, a crash or abort of the process (the worst),
or a frame kio decodes where the guard's walk ends somewhere else than kio's read (the guard's
model of the schema would then be wrong, and its checks with it). Odd-length inputs are passed
as a read-only memoryview, as the broker passes large frames.
"""

from __future__ import annotations

import os
import struct
import sys

import atheris

with atheris.instrument_imports(include=["oncelog.protocol"]):
    from oncelog.protocol import codec, guard

from oncelog import apis

from ._runner import main as run

SEEDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "requests")
# Every (api_key, version) a client may send, and the Envelope v0 a cluster's nodes send each
# other on their control sockets (oncelog.cluster; decoded by the same codec, then its inner frame
# by the broker as any request).
SERVED = sorted([(key, version) for key, module in apis.HANDLERS.items()
                 for version in range(module.MIN_VERSION, module.MAX_VERSION + 1)] + [(58, 0)])
_SERVED_SET = frozenset(SERVED)


def instrument_generated_walks() -> None:
    """The guard's walks are generated with exec, which the import hook never sees: instrument
    each one in place, so libFuzzer gets coverage of every branch of every request's walk."""
    for key, version in SERVED:
        atheris.instrument_func(guard._checker(codec.request_class(key, version)))


def served_frame(data: bytes) -> bytes:
    """``data`` with its header's (api_key, api_version) moved onto a served pair if needed."""
    if len(data) < 4:
        return data
    key, version = struct.unpack_from(">hh", data)
    if (key, version) in _SERVED_SET:
        return data
    key, version = SERVED[((key & 0xFFFF) * 65536 + (version & 0xFFFF)) % len(SERVED)]
    return struct.pack(">hh", key, version) + data[4:]


def test_one_input(data: bytes) -> None:
    frame = served_frame(data)
    if len(frame) % 2:
        frame = memoryview(frame)
    try:
        key, version, _ = codec.peek_header(frame)
        codec.decode_request(frame, key, version)
    except codec.DecodeError:
        return
    # Decoded: the guard accepted it, and must have walked it exactly as kio read it.
    cls = codec.request_class(key, version)
    end = guard.check_request(cls, frame)
    try:
        _, used = codec.reader(cls.__header_schema__)(frame, 0)
        _, size = codec.reader(cls)(frame, used)
    except KeyError:
        return  # unknown tagged fields: decoded through the strip path
    if end != used + size:
        raise AssertionError(f"{cls.__name__} v{version}: the guard ended at {end}, kio at {used + size}")


if __name__ == "__main__":
    instrument_generated_walks()
    run("requests", test_one_input, [SEEDS])
    sys.exit(0)
