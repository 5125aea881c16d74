"""The full-disk fault: a small filesystem for the broker's data dir and a ballast that fills it.

* :class:`SmallDisk` mounts a size-limited tmpfs (``mount -t tmpfs -o size=N tmpfs PATH``) for
  the life of a ``with`` block and unmounts it after. Mounting needs root (CAP_SYS_ADMIN); when
  it is not permitted, :class:`DiskFaultUnavailable` says why, so a test can skip with that reason.
* :class:`Ballast` is a file on that filesystem: :meth:`Ballast.fill` writes it until the
  filesystem answers ENOSPC (no free block left), :meth:`Ballast.release` deletes it, and the
  space is back at once. The broker is not told: it meets ENOSPC on its next write.

tmpfs allocates whole pages, so after a fill a file's last partly used page still takes small
appends: a write fails only once it needs a new page. Tests that must see a write refused make
it larger than a page (or keep writing until one is refused).

Invariant: a ``SmallDisk`` that entered is unmounted when the block exits, even if the block
raised (a lazy unmount when a process still holds files there, e.g. a broker being killed).
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess

CHUNK = 1 << 20


class DiskFaultUnavailable(RuntimeError):
    """The small filesystem cannot be mounted here (not root, no mount(8), mount refused)."""


def free_bytes(path: str) -> int:
    """Bytes an unprivileged writer may still allocate on the filesystem holding ``path``."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


class SmallDisk:
    """A tmpfs of ``size_bytes`` (rounded up to pages by the kernel) mounted at ``path``
    (created if missing) while the ``with`` block runs; ``inodes`` limits how many files and
    directories it holds (tmpfs' ``nr_inodes``; the root directory takes one): creating a file
    past it fails with ENOSPC, as on a filesystem whose inode table is full."""

    def __init__(self, path: str, size_bytes: int, *, inodes: int | None = None) -> None:
        if size_bytes <= 0:
            raise ValueError(f"size_bytes must be positive, not {size_bytes}")
        self.path = os.path.abspath(path)
        self.size_bytes = size_bytes
        self.inodes = inodes
        self.mounted = False

    def __enter__(self) -> "SmallDisk":
        if os.geteuid() != 0:
            raise DiskFaultUnavailable(f"mounting a tmpfs at {self.path} needs root (running as uid {os.geteuid()})")
        mount = shutil.which("mount")
        if mount is None:
            raise DiskFaultUnavailable("mount(8) is not on PATH")
        os.makedirs(self.path, exist_ok=True)
        options = f"size={self.size_bytes}" + (f",nr_inodes={self.inodes}" if self.inodes else "")
        done = subprocess.run([mount, "-t", "tmpfs", "-o", options, "tmpfs", self.path], capture_output=True, text=True)
        if done.returncode != 0:
            raise DiskFaultUnavailable(f"mount -t tmpfs at {self.path} refused (exit {done.returncode}): "
                                       f"{(done.stderr or done.stdout).strip()}")
        self.mounted = True
        return self

    def __exit__(self, *exc) -> None:
        self.unmount()

    def unmount(self) -> None:
        if not self.mounted:
            return
        umount = shutil.which("umount") or "umount"
        done = subprocess.run([umount, self.path], capture_output=True, text=True)
        if done.returncode != 0:  # busy: a process still has files open there; detach it now
            done = subprocess.run([umount, "-l", self.path], capture_output=True, text=True)
            if done.returncode != 0:
                raise OSError(f"umount {self.path} failed: {(done.stderr or done.stdout).strip()}")
        self.mounted = False

    @property
    def free_bytes(self) -> int:
        return free_bytes(self.path)


class Ballast:
    """A file at ``path`` that takes the free space of its filesystem."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)

    @property
    def size(self) -> int:
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0

    def fill(self, leave_bytes: int = 0) -> int:
        """Grow the ballast until ``leave_bytes`` or less are free (0: until a one-byte write
        is refused with ENOSPC, so nothing is left); returns the ballast's size. Calling it
        again tops it up (after someone freed space)."""
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            step = CHUNK
            while True:
                n = step
                if leave_bytes:
                    n = min(step, free_bytes(os.path.dirname(self.path)) - leave_bytes)
                    if n <= 0:
                        break
                try:
                    os.write(fd, bytes(n))  # a short write just means the next one is refused
                except OSError as exc:
                    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    if step == 1:
                        break
                    step = max(step // 16, 1)  # finer steps into the last free blocks
            try:
                os.fsync(fd)  # on a disk-backed filesystem, make the blocks really taken
            except OSError:
                pass
        finally:
            os.close(fd)
        return self.size

    def release(self) -> None:
        """Delete the ballast: its space is free again."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
