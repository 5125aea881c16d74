"""Small file helpers shared by the storage code, and the filesystem seam of the metadata.

:class:`FileSystem` is what :class:`oncelog.metadata.store.MetadataStore` does to files: read a
document, replace one atomically, make a directory's entries durable, look at a file. Two
implementations: :class:`OsFileSystem` (the real one, the functions of this module) and
:class:`MemoryFileSystem`, which models what a crash keeps — a file's bytes only once fsynced, a
name only once its directory is fsynced — so a test can crash the store at any point without a
SIGKILL (:meth:`MemoryFileSystem.crash`) and make the next fsync or write fail
(``fail_next_sync``, ``fail_next_write``), as franz-go's kfake does with its ``memFS``.
The partition logs (segments, indexes) still use ``os`` directly.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Protocol


SECRET_MODE = 0o600  # credentials and ACLs: the broker's user alone may read them


def atomic_write(path: str, data: str | bytes, *, mode: int | None = None) -> None:
    """Write-then-rename so a crash leaves either the old or the new file, never half of one.
    A write that fails (a full disk: ENOSPC) removes its temporary file, so a failed attempt
    holds no space and leaves nothing behind; the old file stays as it was.

    With ``mode`` (:data:`SECRET_MODE` for a secret), the temporary file is created with exactly
    that mode before a byte is written, and the rename carries it over: the file is never, at
    any moment, readable more widely than ``mode`` — whatever the process umask."""
    tmp = path + ".tmp"
    try:
        if mode is None:
            f = open(tmp, "wb")
        else:
            # A temporary file a crash left behind would keep its own mode if reopened: start anew.
            # O_EXCL also refuses to follow a link planted at that name.
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
            try:
                os.fchmod(fd, mode)  # the umask may have narrowed the creation mode: make it exact
            except BaseException:
                os.close(fd)
                raise
            f = os.fdopen(fd, "wb")
        with f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def restrict_mode(path: str, mode: int = SECRET_MODE) -> bool:
    """Set an existing file's permission bits to ``mode`` if they allow more (a secret file an
    older oncelog wrote under the umask, 0644); True when they were changed. A missing file is
    left missing."""
    try:
        current = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return False
    if current & ~mode == 0:
        return False
    os.chmod(path, mode)
    return True


def fsync_dir(path: str) -> None:
    """Make a directory's entries (a file created or renamed in it) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileSystem(Protocol):
    """The file operations of the metadata store (see the module docstring)."""

    def read(self, path: str) -> bytes:
        """The file's bytes; FileNotFoundError if there is none."""

    def replace(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        """:func:`atomic_write`: a crash leaves the old file or the new one."""

    def sync_dir(self, path: str) -> None:
        """:func:`fsync_dir`."""

    def makedirs(self, path: str, mode: int) -> None: ...

    def exists(self, path: str) -> bool: ...

    def stamp(self, path: str) -> tuple[int, int] | None:
        """What changes with every replace of the file (None: no such file)."""

    def restrict(self, path: str, mode: int) -> bool:
        """:func:`restrict_mode`."""


class OsFileSystem:
    """The real filesystem."""

    def read(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def replace(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        atomic_write(path, data, mode=mode)

    def sync_dir(self, path: str) -> None:
        fsync_dir(path)

    def makedirs(self, path: str, mode: int) -> None:
        os.makedirs(path, mode=mode, exist_ok=True)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def stamp(self, path: str) -> tuple[int, int] | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns)

    def restrict(self, path: str, mode: int) -> bool:
        return restrict_mode(path, mode)


class MemoryFileSystem:
    """Files in memory, with what a crash would keep (see the module docstring).

    Model: a name points at an inode; an inode's bytes survive a crash once fsynced (the
    ``replace`` fsyncs its temporary file, as :func:`atomic_write` does); a name — created or
    renamed over — survives only once its directory is fsynced (:meth:`sync_dir`)."""

    def __init__(self) -> None:
        self._data: dict[int, bytes] = {}  # inode -> bytes as written
        self._synced: dict[int, bytes] = {}  # inode -> bytes as fsynced
        self._modes: dict[int, int] = {}
        self._names: dict[str, int] = {}  # path -> inode, as a reader sees it now
        self._durable: dict[str, int] = {}  # path -> inode, as a crash leaves it
        self._dirs: set[str] = set()
        self._next = 1
        self.fail_next_sync = False  # the next fsync fails (EIO), once
        self.fail_next_write = False  # the next write fails (ENOSPC), once
        self.syncs = 0

    def read(self, path: str) -> bytes:
        inode = self._names.get(path)
        if inode is None:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        return self._data[inode]

    def replace(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        if os.path.dirname(path) not in self._dirs:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", os.path.dirname(path))
        if self.fail_next_write:
            self.fail_next_write = False
            raise OSError(errno.ENOSPC, "No space left on device", path)
        inode, self._next = self._next, self._next + 1
        self._data[inode] = bytes(data)
        self._modes[inode] = 0o644 if mode is None else mode
        self._fsync(path)
        self._synced[inode] = bytes(data)
        self._names[path] = inode  # the rename: visible now, durable at the directory's fsync

    def sync_dir(self, path: str) -> None:
        self._fsync(path)
        for name, inode in self._names.items():
            if os.path.dirname(name) == path:
                self._durable[name] = inode

    def _fsync(self, path: str) -> None:
        if self.fail_next_sync:
            self.fail_next_sync = False
            raise OSError(errno.EIO, "Input/output error", path)
        self.syncs += 1

    def makedirs(self, path: str, mode: int) -> None:
        self._dirs.add(path)

    def exists(self, path: str) -> bool:
        return path in self._names or path in self._dirs

    def stamp(self, path: str) -> tuple[int, int] | None:
        inode = self._names.get(path)
        return None if inode is None else (inode, 0)

    def restrict(self, path: str, mode: int) -> bool:
        inode = self._names.get(path)
        if inode is None or self._modes[inode] & ~mode == 0:
            return False
        self._modes[inode] = mode
        return True

    def mode(self, path: str) -> int:
        return self._modes[self._names[path]]

    def crash(self) -> None:
        """What a power cut leaves: the names whose directory was fsynced, each with the bytes
        its inode had at its last fsync."""
        self._names = dict(self._durable)
        self._data = {inode: self._synced.get(inode, b"") for inode in set(self._names.values())}
