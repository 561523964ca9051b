"""Files that hold tenants' data (CoTs, grades, cached judge replies) are private to the user.

The job store, the response cache and the API keys file are created 0600 whatever the umask,
with their SQLite WAL/SHM companions, and the data directory 0700 when FaithJudge creates it.
A directory that already exists keeps its mode (it may be shared on purpose: ``/tmp``, a
project folder); the files inside it are private all the same. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import BinaryIO

__all__ = ["open_private", "private_dir", "private_file"]

_SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def private_dir(path: str | Path) -> Path:
    """Create ``path`` (and missing parents) as 0700; an existing directory is left as it is."""
    path = Path(path)
    missing = []
    for parent in (path, *path.parents):
        if parent.exists():
            break
        missing.append(parent)
    path.mkdir(parents=True, exist_ok=True)
    for created in missing:
        os.chmod(created, 0o700)  # mkdir's mode is cut by the umask; chmod's is not
    return path


def private_file(path: str | Path) -> Path:
    """Create ``path`` empty if missing, and make it and its SQLite companions 0600."""
    path = Path(path)
    private_dir(path.parent)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for candidate in (path, *(path.with_name(path.name + s) for s in _SQLITE_COMPANIONS)):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(candidate, 0o600)
    return path


def open_private(path: str | Path) -> BinaryIO:
    """Open ``path`` for writing from empty, as a 0600 file whatever the umask or its old mode."""
    path = Path(path)
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise
