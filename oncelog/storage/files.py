"""Small file helpers shared by the storage code."""

from __future__ import annotations

import os


def atomic_write(path: str, data: str | bytes) -> None:
    """Write-then-rename so a crash leaves either the old or the new file, never half of one."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
