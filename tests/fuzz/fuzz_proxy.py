"""Fuzz the fault proxy's decoders (``oncelog.chaos.proxy``): ``read_frame`` over an asyncio
stream fed arbitrary bytes in arbitrary chunks, and ``request_header`` on each frame it hands out.

    .venv/bin/python -m tests.fuzz.fuzz_proxy -runs=1000000
    .venv/bin/python -m tests.fuzz.fuzz_proxy crash-file          # replay one input

The input gives a frame limit, then the stream (raw bytes, or a size prefix the input picks
followed by that many filler bytes), cut into chunks. A bug is: any exception but FrameRefused
(a size prefix no frame has) or IncompleteReadError (the stream ended inside a frame); a frame
that is not, byte for byte, the stream's next frame with its prefix; a frame over the limit
handed out, or a valid one refused; ``request_header`` or ``request_client_id`` raising, or
answering for a frame too short to hold what they read.
"""

from __future__ import annotations

import asyncio
import struct
import sys

import atheris

with atheris.instrument_imports(include=["oncelog.chaos.proxy"]):
    from oncelog.chaos.proxy import FrameRefused, read_frame, request_client_id, request_header

from ._runner import main as run

LIMITS = [0, 1, 8, 12, 100, 4096, 65536, 1 << 20]
SIZES = [-1, 0, 1, 7, 8, 11, 12, 13, 100, 4096, 65536, 70000, 1 << 20, (1 << 31) - 1]
FILLER = bytes(range(251)) * (70_000 // 251 + 2)


def build(fdp) -> tuple[int, bytes, list[int]]:
    limit = fdp.PickValueInList(LIMITS)
    stream = bytearray()
    for _ in range(fdp.ConsumeIntInRange(0, 8)):
        if fdp.ConsumeBool():
            stream += fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 64))
        else:
            size = fdp.PickValueInList(SIZES)
            stream += struct.pack(">i", size)
            body = min(max(size, 0), 70_000)
            stream += FILLER[:body] if fdp.ConsumeBool() else FILLER[:fdp.ConsumeIntInRange(0, body)]
    chunks = [fdp.ConsumeIntInRange(1, 4096) for _ in range(fdp.ConsumeIntInRange(0, 16))]
    return limit, bytes(stream), chunks


async def drive(limit: int, stream: bytes, chunks: list[int]) -> None:
    reader = asyncio.StreamReader(limit=1 << 22)
    pos = 0
    for n in chunks:
        reader.feed_data(stream[pos:pos + n])
        pos += n
    reader.feed_data(stream[pos:])
    reader.feed_eof()
    off = 0
    while True:
        try:
            frame = await read_frame(reader, limit)
        except FrameRefused:
            size = struct.unpack_from(">i", stream, off)[0]
            if 0 <= size <= limit:
                raise AssertionError(f"a frame of {size} bytes (limit {limit}) was refused")
            return
        except asyncio.IncompleteReadError:
            rest = len(stream) - off
            if rest >= 4:
                size = struct.unpack_from(">i", stream, off)[0]
                if 0 <= size <= limit and rest - 4 >= size:
                    raise AssertionError("a complete frame was not handed out")
            return
        size = struct.unpack_from(">i", stream, off)[0]
        if not 0 <= size <= limit:
            raise AssertionError(f"a frame of {size} bytes (limit {limit}) was handed out")
        if frame != stream[off:off + 4 + size]:
            raise AssertionError(f"the frame at offset {off} is not the stream's")
        api_key, correlation_id = request_header(frame)
        if len(frame) < 12 and (api_key is not None or correlation_id is not None):
            raise AssertionError("a header read from a frame too short to hold one")
        client_id = request_client_id(frame)
        if client_id is not None and (len(frame) < 14 or len(client_id) > len(frame) - 14):  # chars <= bytes
            raise AssertionError("a client id longer than its frame")
        off += 4 + size


def test_one_input(data: bytes) -> None:
    limit, stream, chunks = build(atheris.FuzzedDataProvider(data))
    asyncio.run(drive(limit, stream, chunks))


if __name__ == "__main__":
    run("proxy", test_one_input, [])
    sys.exit(0)
