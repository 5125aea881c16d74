"""Small file helpers shared by the storage code."""

from __future__ import annotations

import os
import stat


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
