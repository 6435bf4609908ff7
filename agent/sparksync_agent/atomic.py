"""Atomic file writes: temp file in the same directory, fsync, rename.

A crash mid-write leaves either the old file or the new one, never half of
either, which matters for the token, the node id and every persisted config.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes | str, mode: int = 0o600, *, replace: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically, created with ``mode``.

    ``replace=False`` only creates it: FileExistsError when it exists, so of
    two processes creating one file at once, one wins and the other can read
    what the winner wrote.
    """
    if isinstance(data, str):
        data = data.encode()
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file 0600; chmod before any byte lands so a wider
        # mode is never observed with partial content, nor a narrower one lost.
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails if path exists, unlike a rename
            os.unlink(tmp)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    # The rename itself is only durable once the directory entry is flushed.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
