"""Fuzz the frame decoder: ``framing.BufferedFrameReader`` fed arbitrary bytes in arbitrary chunks.

    .venv/bin/python -m tests.fuzz.fuzz_framing -runs=1000000
    .venv/bin/python -m tests.fuzz.fuzz_framing crash-file          # replay one input

The input describes a byte stream and how it arrives: a socket.request.max.bytes, then pieces
that are either raw bytes from the input or a size prefix the input picks (0 .. 400,000, around
the reader's thresholds) followed by that many filler bytes, whole or cut short; then the sizes
of the reads (what ``get_buffer`` offers caps each). The reader is driven exactly as asyncio's
BufferedProtocol drives it (``get_buffer()``, write into it, ``updated(n)``).

A bug is: any exception but FrameTooLarge / InvalidFrame; an empty buffer offered (the
connection would spin); a frame that is not, byte for byte, the next frame of the stream (also
checked after all reads, so a frame aliasing a buffer later reused is caught); a writable
memoryview handed out as a frame (kio needs read-only); a refusal of a frame whose size is
valid (complete frames read together with a bad prefix may be dropped with it: the
connection closes anyway), or no refusal of one whose size is not; a frame left unreported when all its bytes came;
the reader holding more than socket.request.max.bytes + 4 for a frame in progress.
"""

from __future__ import annotations

import struct
import sys

import atheris

with atheris.instrument_imports(include=["oncelog.protocol.framing"]):
    from oncelog.protocol.framing import BufferedFrameReader, FrameTooLarge, InvalidFrame

from ._runner import main as run

MAX_FRAMES = [0, 1, 8, 100, 4096, 65535, 65536, 70000, 262144, 300000, 1 << 20, 100 << 20]
SIZES = [0, 1, 4, 7, 100, 4095, 4096, 16383, 16384, 65531, 65535, 65536, 65537, 100000, 262140,
         262144, 262145, 300000]
FILLER = bytes(range(251)) * (400_000 // 251 + 2)  # 251: a frame's bytes depend on its offset
MAX_READS = 3000  # then the rest arrives in reads as large as the reader offers


def build_stream(fdp) -> bytes:
    stream = bytearray()
    for _ in range(fdp.ConsumeIntInRange(0, 6)):
        kind = fdp.ConsumeIntInRange(0, 3)
        if kind == 0:
            stream += fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 64))
            continue
        size = fdp.PickValueInList(SIZES) if kind == 1 else fdp.ConsumeIntInRange(0, 400_000)
        if kind == 3:
            size = -fdp.ConsumeIntInRange(1, 2**31)  # a negative size
        body = size if size >= 0 and fdp.ConsumeBool() else fdp.ConsumeIntInRange(0, max(size, 0))
        start = len(stream) % 251
        stream += struct.pack(">i", size) + FILLER[start : start + body]
    return bytes(stream)


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    max_frame = fdp.PickValueInList(MAX_FRAMES)
    stream = build_stream(fdp)
    reader = BufferedFrameReader(max_frame)
    frames: list = []
    pos = reads = 0
    refused = None
    try:
        while pos < len(stream):
            view = reader.get_buffer()
            if len(view) == 0:
                raise AssertionError("get_buffer() offered an empty buffer")
            want = len(view)
            if reads < MAX_READS and fdp.remaining_bytes():
                want = fdp.ConsumeIntInRange(1, 70_000) if fdp.ConsumeBool() else fdp.ConsumeIntInRange(1, 64)
            n = min(len(view), want, len(stream) - pos)
            view[:n] = stream[pos : pos + n]
            del view
            pos += n
            reads += 1
            got = reader.updated(n)
            check_frames(stream, frames, got, max_frame)
            frames.extend(got)
            held = getattr(reader, "buffered", 0)
            if held > max_frame + 4:
                raise AssertionError(f"reader holds {held} bytes, socket.request.max.bytes={max_frame}")
    except (FrameTooLarge, InvalidFrame) as exc:
        refused = exc
    check_frames(stream, [], frames, max_frame)  # once more, after every read
    off = sum(4 + len(f) for f in frames)
    rest = stream[off:]
    if refused is not None:
        # Complete frames read together with a bad prefix may be dropped with it (the
        # connection closes); the refusal must come from some prefix past them.
        while True:
            size = struct.unpack_from(">i", rest)[0] if len(rest) >= 4 else None
            if size is None or (0 <= size <= max_frame and len(rest) - 4 < size):
                raise AssertionError(f"refused with no bad prefix in the stream (max {max_frame}): {refused!r}")
            if not 0 <= size <= max_frame:
                break
            rest = rest[4 + size :]
    elif len(rest) >= 4:
        size = struct.unpack_from(">i", rest)[0]
        if size < 0 or size > max_frame:
            raise AssertionError(f"a frame of size {size} (max {max_frame}) was not refused")
        if len(rest) - 4 >= size:
            raise AssertionError(f"a complete frame of {size} bytes was not handed out")


def check_frames(stream: bytes, before: list, got: list, max_frame: int) -> None:
    off = sum(4 + len(f) for f in before)
    for f in got:
        if isinstance(f, memoryview):
            if not f.readonly:
                raise AssertionError("a frame was handed out as a writable memoryview")
        elif not isinstance(f, bytes):
            raise AssertionError(f"a frame of type {type(f).__name__}")
        size = struct.unpack_from(">i", stream, off)[0]
        if not 0 <= size <= max_frame or len(f) != size or f != stream[off + 4 : off + 4 + size]:
            raise AssertionError(f"frame at stream offset {off} is not the stream's frame of {size} bytes")
        off += 4 + size


if __name__ == "__main__":
    run("framing", test_one_input, [])
    sys.exit(0)
