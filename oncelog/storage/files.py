"""Small file helpers shared by the storage code."""

from __future__ import annotations

import os


def atomic_write(path: str, data: str | bytes) -> None:
    """Write-then-rename so a crash leaves either the old or the new file, never half of one.
    A write that fails (a full disk: ENOSPC) removes its temporary file, so a failed attempt
    holds no space and leaves nothing behind; the old file stays as it was."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
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


def fsync_dir(path: str) -> None:
    """Make a directory's entries (a file created or renamed in it) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
