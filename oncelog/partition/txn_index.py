"""The aborted-transaction index of one partition: what read_committed fetches must drop.

File ``aborted-txns`` in the partition directory, a sequence of 34-byte entries in marker order
(Kafka's ``.txnindex`` entry, one file per partition rather than one per segment)::

    int16 version (0) | int64 producer_id | int64 first_offset | int64 last_offset | int64 last_stable_offset

An entry is appended when an ABORT marker is written (``last_offset`` is the marker's offset,
``first_offset`` the first offset of the producer's transaction on this partition). Entries are
derived data: the replay at start-up re-creates those of markers after the producer-state
snapshot it starts from, so an entry must be durable (:meth:`AbortedTxnIndex.sync`) before a
snapshot past its marker is written. Entries whose marker is at or beyond the log end after
recovery, or below the log start, are dropped (the file is then rewritten atomically).

A full disk: an entry whose write fails (or is short) stays in memory, the file is cut back to
its last whole entry and marked ``behind``; nothing is appended to it until it has been
rewritten whole from memory (tried at each later append, and by :meth:`AbortedTxnIndex.sync`,
which raises while it cannot be done: the caller then takes no snapshot past the missing entry,
so the replay at start-up still re-creates it from its marker).
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass

from ..storage.files import atomic_write

FILE_NAME = "aborted-txns"
ENTRY = struct.Struct(">hqqqq")  # version 0, producer id, first, last, lso (Kafka's .txnindex)


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An aborted transaction's range on this partition: data of ``producer_id`` from
    ``first_offset`` up to the ABORT marker at ``last_offset`` must be dropped by read_committed
    consumers. ``last_stable_offset`` is the LSO once the abort completed, as Kafka records it:
    the first offset of another open transaction, else the offset after the marker."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class AbortedTxnIndex:
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, FILE_NAME)
        self.entries: list[AbortedTxn] = []  # in marker (last_offset) order
        self._fd: int | None = None
        self.behind = False  # the file lacks entries that are in memory (see the module docstring)

    def load(self, log_end_offset: int) -> None:
        """Read the file, keeping the entries of markers below ``log_end_offset`` (those of
        markers that recovery truncated are dropped), and open it for appending."""
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            raw = b""
        usable = len(raw) - len(raw) % ENTRY.size
        self.entries = [AbortedTxn(pid, first, last, lso)
                        for _, pid, first, last, lso in ENTRY.iter_unpack(raw[:usable]) if last < log_end_offset]
        try:
            if len(raw) != len(self.entries) * ENTRY.size:  # entries dropped, or a torn tail
                self._rewrite()
            else:
                self._reopen()
        except OSError:  # a full disk at start-up: memory is right, the file is rewritten later
            self.behind = True

    def append(self, entry: AbortedTxn) -> None:
        self.entries.append(entry)
        if self.behind:
            try:
                self._rewrite()
            except OSError:
                pass
            return
        data = ENTRY.pack(0, entry.producer_id, entry.first_offset, entry.last_offset, entry.last_stable_offset)
        try:
            if os.write(self._fd, data) != len(data):
                raise OSError(f"short write to {self.path}")
        except OSError:
            self.behind = True
            try:  # no torn entry may stay: a later whole rewrite is the only way forward
                os.ftruncate(self._fd, (len(self.entries) - 1) * ENTRY.size)
            except OSError:
                pass

    def has_marker(self, marker_offset: int) -> bool:
        i = bisect.bisect_left(self.entries, marker_offset, key=lambda a: a.last_offset)
        return i < len(self.entries) and self.entries[i].last_offset == marker_offset

    def aborted_between(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping [start, end)."""
        i = bisect.bisect_left(self.entries, start, key=lambda a: a.last_offset)
        return [(a.producer_id, a.first_offset) for a in self.entries[i:] if a.first_offset < end]

    def trim(self, log_start_offset: int) -> None:
        """Drop the entries whose marker is below the new log start offset."""
        keep = [a for a in self.entries if a.last_offset >= log_start_offset]
        if len(keep) != len(self.entries):
            self.entries = keep
            try:
                self._rewrite()
            except OSError:  # the extra entries in the file are below the log start: harmless
                self.behind = True  # but the file must not be appended to before it is rewritten

    def sync(self) -> None:
        """Every entry in memory durable in the file; OSError if that cannot be done now."""
        if self.behind:
            self._rewrite()
        else:
            os.fsync(self._fd)

    def close(self, *, sync: bool = True) -> None:
        if self._fd is None:
            return
        if sync:
            os.fsync(self._fd)
        os.close(self._fd)
        self._fd = None

    def _rewrite(self) -> None:
        """Replace the file with the entries in memory (atomically, fsynced)."""
        data = b"".join(ENTRY.pack(0, a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset)
                        for a in self.entries)
        atomic_write(self.path, data)
        self.behind = False
        self._reopen()

    def _reopen(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
