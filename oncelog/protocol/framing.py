"""Size-prefixed framing of the Kafka wire protocol, sans-IO.

Every request and response is ``int32 size`` followed by ``size`` bytes.
:class:`BufferedFrameReader` hands out the buffers the socket reads into and yields whole
frames. It refuses a frame whose declared size exceeds ``max_frame_bytes`` (Kafka's
``socket.request.max.bytes``) as soon as the 4-byte prefix is seen, before allocating anything
for it.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")


class FrameTooLarge(ValueError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"request frame of {size} bytes exceeds socket.request.max.bytes={limit}")
        self.size = size
        self.limit = limit


class InvalidFrame(ValueError):
    pass


class BufferedFrameReader:
    """Frames for an ``asyncio.BufferedProtocol``: the transport reads straight into buffers we
    hand out, so a large request (a 1 MiB produce) lands in a buffer of its final size and is
    passed on as a read-only view, never copied; small frames are cut from a shared read buffer.

    Protocol: ``get_buffer()`` → memoryview to receive into; ``updated(n)`` → completed frames
    (``bytes`` or read-only ``memoryview``). Oversized frames are refused from the prefix alone.
    """

    __slots__ = ("_buf", "_start", "_end", "_big", "_big_got", "_max")

    def __init__(self, max_frame_bytes: int, chunk: int = 256 * 1024) -> None:
        self._buf = bytearray(chunk)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None
        self._big_got = 0
        self._max = max_frame_bytes

    def get_buffer(self) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_got :]
        if self._end == len(self._buf):
            # Move the partial frame at the front to make room.
            pending = self._end - self._start
            self._buf[:pending] = self._buf[self._start : self._end]
            self._start, self._end = 0, pending
        return memoryview(self._buf)[self._end :]

    def updated(self, nbytes: int) -> list:
        if self._big is not None:
            self._big_got += nbytes
            if self._big_got < len(self._big):
                return []
            frame = memoryview(self._big).toreadonly()
            self._big = None
            return [frame]
        self._end += nbytes
        frames = []
        buf = self._buf
        while self._end - self._start >= 4:
            size = _SIZE.unpack_from(buf, self._start)[0]
            if size < 0:
                raise InvalidFrame(f"negative frame size {size}")
            if size > self._max:
                raise FrameTooLarge(size, self._max)
            body = self._start + 4
            if self._end - body >= size:
                frames.append(bytes(buf[body : body + size]))
                self._start = body + size
                continue
            if size > len(buf) // 2:
                # Large frame: give it its own buffer and receive the rest straight into it.
                self._big = bytearray(size)
                have = self._end - body
                self._big[:have] = buf[body : self._end]
                self._big_got = have
                self._start = self._end = 0
            break
        if self._start == self._end:
            self._start = self._end = 0
        return frames
