"""Large request frames' buffers are reused (oncelog.protocol.framing's pool) only once nothing
refers to them: a frame, or a slice of it that a request keeps (its record batches), is never
overwritten by a later frame. (Kept beside the storage tests: it guards what the log appends.)"""

from __future__ import annotations

import os
import struct

from oncelog.protocol import framing
from oncelog.protocol.framing import POOL_BUFFERS, POOL_MAX_BYTES, BufferedFrameReader

MiB = 1 << 20


def receive(reader: BufferedFrameReader, body: bytes, read: int = 256 * 1024) -> memoryview:
    wire = memoryview(struct.pack(">i", len(body)) + body)
    out, pos = [], 0
    while pos < len(wire):
        buf = reader.get_buffer(None)
        n = min(len(buf), len(wire) - pos, read)
        buf[:n] = wire[pos : pos + n]
        pos += n
        out += reader.updated(n)
    assert len(out) == 1
    return out[0]


def test_a_frame_still_referenced_is_never_overwritten_by_the_next_one():
    framing._pool.clear()
    reader = BufferedFrameReader(16 * MiB)
    first_body = os.urandom(MiB)
    first = receive(reader, first_body)
    records = first[1000:5000]  # what a decoded request might keep of it
    del first
    for _ in range(5):
        other = os.urandom(MiB)
        assert bytes(receive(reader, other)) == other
    assert bytes(records) == first_body[1000:5000]


def test_a_buffer_nobody_refers_to_is_reused():
    framing._pool.clear()
    reader = BufferedFrameReader(16 * MiB)
    frame = receive(reader, os.urandom(MiB))
    buffer_id = id(frame.obj)
    del frame
    body = os.urandom(MiB - 100)  # a little smaller: the same buffer, cut
    frame = receive(reader, body)
    assert id(frame.obj) == buffer_id and bytes(frame) == body and len(frame) == len(body)


def test_the_pool_is_bounded_whatever_the_connections():
    framing._pool.clear()
    readers = [BufferedFrameReader(64 * MiB) for _ in range(10)]
    frames = [receive(r, os.urandom(300_000)) for r in readers]
    assert len(framing._pool) <= POOL_BUFFERS
    big = receive(readers[0], os.urandom(POOL_MAX_BYTES + 1))
    assert all(len(b) <= POOL_MAX_BYTES for b in framing._pool)
    for f, r in zip(frames, readers):
        assert not r.in_progress and r.buffered == 0
    del frames, big


def test_frames_received_in_any_split_are_whole_with_reuse():
    framing._pool.clear()
    reader = BufferedFrameReader(16 * MiB)
    kept = []
    for i, size in enumerate([70_000, MiB, MiB + 7, 900_000, 2 * MiB, MiB, 65_536, MiB]):
        body = os.urandom(size)
        frame = receive(reader, body, read=[4096, 65_536, 256 * 1024][i % 3])
        assert bytes(frame) == body
        if i % 2:
            kept.append((frame, body))
    for frame, body in kept:
        assert bytes(frame) == body
