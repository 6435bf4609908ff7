"""An exclusive lock between processes, held on a small lock file.

The registry and the client key are read-modify-written by every SparkSync
process the user runs (CLI and GUI at once, two terminals pairing). flock
serialises them; the kernel drops the lock when a process dies, so a crash
never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive_lock(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive flock on ``lock_path`` (created 0600) inside the block."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        # Closing the descriptor releases the lock.
        os.close(fd)
