"""One writer per output file: a run holds an exclusive lock on its output while it writes.

Two runs appending to one results file would interleave their lines (and each would resume from
a view of the file the other is changing). The lock is an advisory ``flock`` on a small file
beside the output, ``.<name>.lock``, which also records the holder's process id so the refusal
can name it. The holder removes the file when it lets go, so a folder of outputs holds no lock
files between runs. The kernel drops the lock when the holder exits, kill -9 included (which
leaves the file behind), so a stale lock file never blocks a later run; the next run's holder
removes it in turn. Standard library only.

Removing the file is safe against a run that opened it a moment before: a run that locks a file
checks that the path still names that file (the same inode) and starts again if the holder
removed it meanwhile, so two runs never hold locks on two different files for one output.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from faithjudge.errors import UserInputError
from faithjudge.private_files import private_dir

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows has no flock; runs there are not locked
    fcntl = None  # type: ignore[assignment]

__all__ = ["OutputBusy", "hold_output", "lock_path"]


class OutputBusy(UserInputError):
    """Another live process is writing the same output."""


def lock_path(output: Path) -> Path:
    return output.with_name(f".{output.name}.lock")


@contextlib.contextmanager
def hold_output(output: Path) -> Iterator[None]:
    """Hold the output's lock for the block, or raise ``OutputBusy`` naming the holder."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    path = lock_path(output)
    private_dir(path.parent)
    fd = _lock(path, output)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        # removed while still locked: a run waiting on this file finds it gone and locks a
        # new one, never this one after we let go
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)  # closing the descriptor releases the lock


def _lock(path: Path, output: Path) -> int:
    """A descriptor of ``path`` holding its exclusive lock, the file still at ``path``."""
    assert fcntl is not None
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                who = f"process {holder}" if holder.isdigit() else "another process"
                raise OutputBusy(
                    f"{output} is being written by {who}; wait for it to finish, or write to "
                    "another output",
                    field="output",
                ) from None
            try:
                current = os.stat(path)
            except FileNotFoundError:
                current = None
            held = os.fstat(fd)
            if current is not None and (current.st_dev, current.st_ino) == (
                held.st_dev,
                held.st_ino,
            ):
                return fd
        except BaseException:
            os.close(fd)
            raise
        # the holder removed the file between our open and our lock: lock the path's new one
        os.close(fd)
