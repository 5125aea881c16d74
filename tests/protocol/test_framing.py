"""The frame reader, sans-IO: frames come out whole whatever the reads, and memory follows the
bytes that arrived, not the size a prefix declares."""

from __future__ import annotations

import random
import struct

import pytest

from oncelog.protocol.framing import (FIRST_CAPACITY, GROWTH, LARGE_FRAME, BufferedFrameReader, FrameTooLarge,
                                      InvalidFrame)

MiB = 1 << 20


def wire_of(frames: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(f)) + f for f in frames)


def deliver(reader: BufferedFrameReader, data: bytes, budget: int | None = None) -> list:
    """Hand ``data`` to the reader as a socket would: into the buffers it gives out, as much as fits."""
    out, pos = [], 0
    while pos < len(data):
        buf = reader.get_buffer(budget)
        assert len(buf) > 0
        n = min(len(buf), len(data) - pos)
        buf[:n] = data[pos : pos + n]
        pos += n
        out += reader.updated(n)
    return out


def test_readers_sharing_one_scratch_buffer_get_their_own_frames_in_any_split():
    rng = random.Random(17)
    scratch = bytearray(64 * 1024)
    streams = []
    for _ in range(3):
        frames = [rng.randbytes(rng.choice([0, 1, 3, 4, 100, 5000, LARGE_FRAME - 5, LARGE_FRAME, 200_000, 1_100_000]))
                  for _ in range(40)]
        streams.append((BufferedFrameReader(2 * MiB, scratch=scratch), wire_of(frames), frames, [0], []))
    while any(pos[0] < len(wire) for _, wire, _, pos, _ in streams):
        reader, wire, _, pos, out = rng.choice(streams)  # reads of several connections interleave
        if pos[0] == len(wire):
            continue
        buf = reader.get_buffer(rng.choice([None, 1, 1000, 70_000]))
        n = min(len(buf), rng.randrange(1, 300_000), len(wire) - pos[0])
        buf[:n] = wire[pos[0] : pos[0] + n]
        pos[0] += n
        out += [bytes(f) for f in reader.updated(n)]
    for reader, _, frames, _, out in streams:
        assert out == frames
        assert not reader.in_progress and reader.buffered == 0 and reader.completed == len(frames)


def test_a_large_declared_size_costs_only_what_arrived():
    reader = BufferedFrameReader(100 * MiB)
    assert deliver(reader, struct.pack(">i", 100 * MiB - 1) + b"abc") == []
    assert reader.in_progress and reader.progress == (3, 100 * MiB - 1)
    assert reader.buffered == FIRST_CAPACITY  # not 100 MiB
    received = 3
    for step in (1000, 100_000, 3 * MiB):
        deliver(reader, bytes(step))
        received += step
        assert reader.buffered <= max(GROWTH * received, FIRST_CAPACITY)
        assert reader.progress == (received, 100 * MiB - 1)


def test_a_frame_mostly_here_is_passed_on_without_a_copy():
    body = random.Random(1).randbytes(MiB)
    reader = BufferedFrameReader(100 * MiB, chunk=256 * 1024)
    wire = wire_of([body])
    frames = deliver(reader, wire)  # the first read brings 256 KiB: a quarter of the frame
    assert len(frames) == 1
    frame = frames[0]
    assert isinstance(frame, memoryview) and frame.readonly
    assert len(frame.obj) == MiB  # received straight into a buffer of its final size
    assert frame == body


def test_budget_caps_each_read_and_what_a_buffer_grows_by():
    reader = BufferedFrameReader(MiB, chunk=256 * 1024)
    assert len(reader.get_buffer(1000)) == 1000
    assert len(reader.get_buffer(None)) == 256 * 1024
    wire = struct.pack(">i", 500_000) + bytes(500_000)
    received, frames = 0, []
    while received < len(wire):
        buf = reader.get_buffer(7000)
        assert 0 < len(buf) <= 7000
        n = min(len(buf), len(wire) - received)
        buf[:n] = wire[received : received + n]
        received += n
        frames += reader.updated(n)
        assert reader.buffered <= received + 7000  # memory follows what arrived plus one read's budget
    assert [len(f) for f in frames] == [500_000]
    # without a budget the same frame takes a few geometric steps, not one per read
    reader = BufferedFrameReader(MiB, chunk=256 * 1024)
    assert deliver(reader, wire[:20_000]) == [] and reader.buffered == 4 * (20_000 - 4)


@pytest.mark.parametrize("prefix, error", [(struct.pack(">i", 1001), FrameTooLarge), (struct.pack(">i", -1), InvalidFrame)])
def test_bad_size_refused_from_the_prefix_even_one_byte_at_a_time(prefix, error):
    reader = BufferedFrameReader(1000)
    for b in prefix[:3]:
        assert deliver(reader, bytes([b])) == []
    assert reader.progress == (3, -1)
    with pytest.raises(error):
        deliver(reader, prefix[3:])


def test_partial_small_frame_holds_only_its_bytes():
    reader = BufferedFrameReader(MiB)
    deliver(reader, struct.pack(">i", LARGE_FRAME - 1) + b"x" * 10)
    assert reader.buffered == 14
    assert deliver(reader, b"y" * (LARGE_FRAME - 11)) == [b"x" * 10 + b"y" * (LARGE_FRAME - 11)]
    assert reader.buffered == 0 and not reader.in_progress
