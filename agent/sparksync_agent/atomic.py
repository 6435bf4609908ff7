"""Atomic file writes: temp file in the same directory, fsync, rename.

A crash mid-write leaves either the old file or the new one, never half of
either, which matters for the token, the node id and every persisted config.

A writer killed mid-write (kill -9, power loss) leaves its temp file,
``.<name>.<pid>@<host tag>.<random>.tmp``. Such leftovers are removed by
the next write of the same file, and by ``remove_stale_temps`` on a whole
directory (the agent and the client call it when they start). A temp file
is stale when the process that wrote it, on this machine, is gone; one of
another machine (a shared home) or without an owner in its name (written
by an older version) only once it is an hour old, so a write in progress
elsewhere is never cut short.
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import re
import socket
import tempfile
import time
from pathlib import Path

log = logging.getLogger(__name__)

TEMP_SUFFIX = ".tmp"
ORPHAN_AGE_S = 3600.0  # a temp file no live writer of this machine owns, kept this long
_HOST_TAG = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
_OWNER = re.compile(r"\.(\d+)@([0-9a-f]{8})\.[^.]+\.tmp$")


def write_atomic(path: Path, data: bytes | str, mode: int = 0o600, *, replace: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically, created with ``mode``.

    ``replace=False`` only creates it: FileExistsError when it exists, so of
    two processes creating one file at once, one wins and the other can read
    what the winner wrote.
    """
    if isinstance(data, str):
        data = data.encode()
    path = Path(path)
    remove_stale_temps(path.parent, path.name)
    owner = f"{os.getpid()}@{_HOST_TAG}"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{owner}.", suffix=TEMP_SUFFIX)
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


def remove_stale_temps(directory: Path, name: str | None = None) -> int:
    """Remove leftover temp files of atomic writes in ``directory`` (of the file ``name`` only, if given).

    Returns how many were removed. Never raises for a file it cannot judge or remove.
    """
    pattern = f".{glob.escape(name)}.*{TEMP_SUFFIX}" if name is not None else f".*{TEMP_SUFFIX}"
    removed = 0
    try:
        candidates = list(Path(directory).glob(pattern))
    except OSError:
        return 0
    for candidate in candidates:
        try:
            if _is_stale(candidate):
                candidate.unlink()
                removed += 1
        except FileNotFoundError:
            continue  # another process removed it (or its writer renamed it) meanwhile
        except OSError as exc:
            log.debug("could not remove the stale temp file %s: %s", candidate, exc)
    if removed:
        log.info("removed %d stale temp file(s) of interrupted writes in %s", removed, directory)
    return removed


def _is_stale(candidate: Path) -> bool:
    owner = _OWNER.search(candidate.name)
    if owner is not None and owner.group(2) == _HOST_TAG:
        return not _alive(int(owner.group(1)))
    return time.time() - candidate.stat().st_mtime > ORPHAN_AGE_S


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True  # this process: maybe another of its threads is writing that file now
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True
