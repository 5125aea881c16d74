"""Size-prefixed framing of the Kafka wire protocol, sans-IO.

Every request and response is ``int32 size`` followed by ``size`` bytes.
:class:`BufferedFrameReader` hands out the buffers the socket reads into and yields whole
frames. It refuses a frame whose declared size exceeds ``max_frame_bytes`` (Kafka's
``socket.request.max.bytes``) as soon as the 4-byte prefix is seen, before allocating anything
for it.

Memory invariants (a declared size is a claim, not a reservation):

* An idle connection holds no read buffer: reads land in a *scratch* buffer that every reader
  of one event loop may share (the loop reads one socket at a time and :meth:`updated` copies
  out everything it keeps before returning).
* A frame being received holds at most ``max(GROWTH * received, FIRST_CAPACITY)`` bytes
  (never more than its declared size, nor more than received + the read's budget): its buffer
  grows geometrically as bytes arrive, so a prefix declaring 100 MiB followed by silence costs
  16 KiB, not 100 MiB. A frame whose bytes
  are mostly here already (a 1 MiB produce: the first read brings 256 KiB) gets its final
  buffer at once and is passed on as a read-only view of it, never copied.
* :attr:`BufferedFrameReader.buffered` is what the reader holds for its unfinished frame, for
  the server's ``queued.max.request.bytes`` accounting.
* A large frame's buffer is reused for a later large frame (of any reader of the process) once
  nothing refers to it any more, instead of a new zero-filled one being allocated (and its pages
  faulted in) for every frame: :func:`_buffer` takes one from a pool of at most
  ``POOL_BUFFERS`` buffers of at most ``POOL_MAX_BYTES`` each, process-wide whatever the number of
  connections. "Nothing refers to it" is checked by the buffer itself: a ``bytearray`` cannot
  be resized while a ``memoryview`` of it (the frame handed out, or any slice of it that the
  request still keeps, such as its record batches) exists, so a buffer still seen by anyone is
  never written to again.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")

SCRATCH_BYTES = 256 * 1024  # one read of pipelined small requests
LARGE_FRAME = 64 * 1024  # frames at least this large are received into a buffer of their own
FIRST_CAPACITY = 16 * 1024  # a large frame's first buffer when little of it has arrived
GROWTH = 4  # a large frame's buffer is at most GROWTH x the bytes received (or FIRST_CAPACITY)
POOL_BUFFERS = 2  # large frames' buffers kept for reuse, process-wide
POOL_MAX_BYTES = 4 * 1024 * 1024  # larger ones are not kept

_pool: list[bytearray] = []


def _buffer(n: int) -> bytearray:
    """A bytearray of length ``n`` whose contents are unspecified (a large frame's buffer: every
    byte of it is received before it is read): a pooled one nobody refers to any more, cut or
    grown by at most 1/8 to ``n``; otherwise a new one. A pooled buffer is taken out of the pool
    before it is checked, so two readers (of two threads) never get the same one."""
    if n <= POOL_MAX_BYTES:
        for _ in range(len(_pool)):
            try:
                buf = _pool.pop()
            except IndexError:
                break
            have = len(buf)
            if n - (n >> 3) <= have <= 2 * n:
                try:
                    # Any resize raises BufferError while a view of the buffer exists.
                    if have > n:
                        del buf[n:]
                    elif have < n:
                        buf += bytes(n - have)
                    else:
                        buf.append(0)
                        del buf[n:]
                    return buf
                except BufferError:
                    pass
            _pool.insert(0, buf)  # still in use, or not this size: kept for a later frame
    return bytearray(n)


def _keep(buf: bytearray) -> None:
    """Offer a large frame's buffer (handed out as a view) to the pool for reuse."""
    if len(buf) <= POOL_MAX_BYTES:
        if len(_pool) >= POOL_BUFFERS:
            del _pool[0]
        _pool.append(buf)


class FrameTooLarge(ValueError):
    def __init__(self, size: int, limit: int, setting: str = "socket.request.max.bytes") -> None:
        super().__init__(f"request frame of {size} bytes exceeds {setting}={limit}")
        self.size = size
        self.limit = limit


class InvalidFrame(ValueError):
    pass


class BufferedFrameReader:
    """Frames for an ``asyncio.BufferedProtocol``.

    Protocol: ``get_buffer(budget)`` → writable memoryview to receive into (at most ``budget``
    bytes when given); ``updated(n)`` → completed frames (``bytes``, or a read-only
    ``memoryview`` for large frames). Oversized or negative sizes raise from the prefix alone.

    Small frames (under ``LARGE_FRAME``) are cut from the scratch buffer; one split across reads
    is stitched in a small bytearray holding only the bytes received. A large frame gets its
    own bytearray, sized to the frame when at least 1/``GROWTH`` of it has arrived and grown
    geometrically (a new buffer and one copy of what arrived) otherwise.
    """

    __slots__ = ("_max", "_max_setting", "_scratch", "_partial", "_frame", "_got", "_size", "_budget", "completed")

    def __init__(self, max_frame_bytes: int, chunk: int = SCRATCH_BYTES, scratch: bytearray | None = None) -> None:
        self._max = max_frame_bytes
        self._max_setting = "socket.request.max.bytes"
        self._scratch = scratch if scratch is not None else bytearray(chunk)
        self._partial: bytearray | None = None  # a small frame's bytes so far, prefix included
        self._frame: bytearray | None = None  # a large frame's buffer (body only)
        self._got = 0  # body bytes of the large frame received
        self._size = 0  # its declared size
        self._budget: int | None = None  # the last read's budget: also caps what a buffer may grow by
        self.completed = 0  # frames returned so far: identifies the frame in progress

    def limit(self, max_frame_bytes: int, setting: str) -> None:
        """From the next size prefix on, frames over ``max_frame_bytes`` raise FrameTooLarge
        naming ``setting`` (a SASL listener's pre-authentication cap, then the usual one)."""
        self._max, self._max_setting = max_frame_bytes, setting

    @property
    def in_progress(self) -> bool:
        """True while part of a frame (even part of its size prefix) has arrived."""
        return self._frame is not None or self._partial is not None

    @property
    def buffered(self) -> int:
        """Bytes allocated for the unfinished frame (0 when none)."""
        if self._frame is not None:
            return len(self._frame)
        if self._partial is not None:
            return len(self._partial)
        return 0

    @property
    def progress(self) -> tuple[int, int]:
        """(bytes received, bytes declared) of the unfinished frame, prefix excluded;
        (n, -1) while its size prefix is incomplete."""
        if self._frame is not None:
            return self._got, self._size
        if self._partial is not None:
            if len(self._partial) < 4:
                return len(self._partial), -1
            return len(self._partial) - 4, _SIZE.unpack_from(self._partial)[0]
        return 0, 0

    def get_buffer(self, budget: int | None = None) -> memoryview:
        """The buffer for the next read. ``budget`` (memory the caller lets this read add, at
        least 1) caps both the read and what a large frame's buffer may grow by for it."""
        if budget is not None:
            budget = max(budget, 1)
        self._budget = budget
        frame = self._frame
        if frame is not None:
            got = self._got
            if got == len(frame):
                frame = self._grow(got)
            end = len(frame) if budget is None else min(len(frame), got + budget)
            return memoryview(frame)[got:end]
        scratch = self._scratch
        if budget is not None and budget < len(scratch):
            return memoryview(scratch)[:budget]
        return memoryview(scratch)

    def _capacity(self, got: int) -> int:
        capacity = min(self._size, max(FIRST_CAPACITY, GROWTH * got))
        return capacity if self._budget is None else min(capacity, got + self._budget)

    def _grow(self, got: int) -> bytearray:
        new = _buffer(self._capacity(got))
        new[:got] = self._frame
        self._frame = new
        return new

    def updated(self, nbytes: int) -> list:
        if self._frame is not None:
            self._got += nbytes
            if self._got < self._size:
                return []
            buf = self._frame
            frame = memoryview(buf).toreadonly()
            self._frame = None
            _keep(buf)
            self.completed += 1
            return [frame]
        frames: list = []
        data = memoryview(self._scratch)[:nbytes]
        pos = 0
        if self._partial is not None:
            pos = self._continue_partial(data, frames)
            if self.in_progress:
                return frames
        while nbytes - pos >= 4:
            size = self._check(_SIZE.unpack_from(data, pos)[0])
            body = pos + 4
            if nbytes - body >= size:
                frames.append(bytes(data[body : body + size]))
                self.completed += 1
                pos = body + size
                continue
            if size >= LARGE_FRAME:
                self._start_large(size, data[body:nbytes])
            else:
                self._partial = bytearray(data[pos:nbytes])
            return frames
        if pos < nbytes:
            self._partial = bytearray(data[pos:nbytes])  # part of a size prefix
        return frames

    def _continue_partial(self, data: memoryview, frames: list) -> int:
        """Feed the start of ``data`` to the small frame (or size prefix) in progress; returns
        how many bytes of ``data`` it took."""
        partial = self._partial
        pos = 0
        if len(partial) < 4:
            pos = min(4 - len(partial), len(data))
            partial += data[:pos]
            if len(partial) < 4:
                return pos
            size = self._check(_SIZE.unpack_from(partial)[0])
            if size >= LARGE_FRAME:
                self._partial = None
                have = data[pos : pos + min(size, len(data) - pos)]
                pos += len(have)
                if len(have) == size:
                    frames.append(bytes(have))
                    self.completed += 1
                else:
                    self._start_large(size, have)
                return pos
        size = _SIZE.unpack_from(partial)[0]
        take = min(4 + size - len(partial), len(data) - pos)
        partial += data[pos : pos + take]
        pos += take
        if len(partial) == 4 + size:
            frames.append(bytes(memoryview(partial)[4:]))
            self._partial = None
            self.completed += 1
        return pos

    def _start_large(self, size: int, have) -> None:
        got = len(have)
        self._size = size
        try:
            frame = _buffer(self._capacity(got))
        except MemoryError:
            raise InvalidFrame(f"no memory for a request frame of {size} bytes") from None
        frame[:got] = have
        self._frame, self._got = frame, got

    def _check(self, size: int) -> int:
        if size < 0:
            raise InvalidFrame(f"negative frame size {size}")
        if size > self._max:
            raise FrameTooLarge(size, self._max, self._max_setting)
        return size
