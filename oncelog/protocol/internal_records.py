"""The one codec of Kafka's internal-record formats: the keys and values of ``__consumer_offsets``
(:mod:`oncelog.groups.records`) and ``__transaction_state`` (:mod:`oncelog.txn.records`), and the
consumer protocol's subscription and assignment inside a classic group's messages
(:mod:`.consumer_protocol`).

These are Kafka's non-flexible ("classic") encodings, big-endian:

    int8 / int16 / int32 / int64   fixed width, signed
    string                         int16 length, then UTF-8; length -1 is null (None)
    bytes                          int32 length, then the bytes; a negative length reads as b""
    array                          int32 count, then the items; a negative count reads as empty

Sans-IO and without schema: the caller's order of calls is the format (each record module
documents its layout in its docstring). Reading past the end of the buffer — a fixed-width field,
or a string or bytes longer than what is left — raises :class:`TruncatedRecord` (a ValueError, as
every other unreadable record), never a short value.
"""

from __future__ import annotations

import struct
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")

_I8, _I16, _I32, _I64 = (struct.Struct(f) for f in (">b", ">h", ">i", ">q"))


class TruncatedRecord(ValueError):
    """The record ends before a field it declares."""


class Writer:
    """Appends fields to a buffer; every method returns the writer, so calls chain.
    :meth:`to_bytes` is the record."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def i8(self, v: int) -> "Writer":
        self.buf += _I8.pack(v)
        return self

    def i16(self, v: int) -> "Writer":
        self.buf += _I16.pack(v)
        return self

    def i32(self, v: int) -> "Writer":
        self.buf += _I32.pack(v)
        return self

    def i64(self, v: int) -> "Writer":
        self.buf += _I64.pack(v)
        return self

    def string(self, s: str | None) -> "Writer":
        if s is None:
            return self.i16(-1)
        b = s.encode()
        self.i16(len(b))
        self.buf += b
        return self

    def bytes_(self, b: bytes) -> "Writer":
        self.i32(len(b))
        self.buf += b
        return self

    def array(self, items: Iterable[T], write: Callable[["Writer", T], object]) -> "Writer":
        """An int32 count, then ``write(self, item)`` for each item."""
        items = list(items)
        self.i32(len(items))
        for item in items:
            write(self, item)
        return self

    def to_bytes(self) -> bytes:
        return bytes(self.buf)


class Reader:
    """Reads fields from ``buf`` in order, from ``pos``."""

    def __init__(self, buf: bytes, pos: int = 0) -> None:
        self.buf, self.pos = buf, pos

    def _take(self, fmt: struct.Struct) -> int:
        if self.pos + fmt.size > len(self.buf):
            raise TruncatedRecord(f"{len(self.buf)}-byte record ends before a {fmt.size}-byte field at {self.pos}")
        v = fmt.unpack_from(self.buf, self.pos)[0]
        self.pos += fmt.size
        return v

    def _span(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise TruncatedRecord(f"{len(self.buf)}-byte record ends before the {n} bytes declared at {self.pos}")
        b = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return b

    def i8(self) -> int:
        return self._take(_I8)

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        return self._span(n).decode()

    def bytes_(self) -> bytes:
        return self._span(max(self.i32(), 0))

    def array(self, read: Callable[["Reader"], T]) -> list[T]:
        """An int32 count, then ``read(self)`` for each item."""
        return [read(self) for _ in range(self.i32())]
