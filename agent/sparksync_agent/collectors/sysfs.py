"""Cheap reads of /proc and /sys files.

The agent samples at up to 10 Hz and must stay under 0.5% of one core, so the
hot path reads these small generated files with raw ``os`` calls: Python's
buffered text layers cost several times more than the read itself.
"""

from __future__ import annotations

import os

_CHUNK = 65536


def read_bytes(path: str) -> bytes:
    """The whole file; raises OSError when it cannot be read."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, _CHUNK)
        if len(data) < _CHUNK:
            return data
        # A generated file may be larger than one chunk (/proc/stat with many IRQs).
        chunks = [data]
        while chunk := os.read(fd, _CHUNK):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_attr(path: str) -> str | None:
    """A sysfs attribute as stripped text, or None when absent or unreadable.

    Many attributes fail by design (``speed`` of a down link raises EINVAL),
    so callers treat None as "the kernel does not say".
    """
    try:
        return read_bytes(path).decode("utf-8", "replace").strip()
    except OSError:
        return None


def read_int_attr(path: str) -> int | None:
    """A sysfs attribute holding one integer (decimal or 0x-hex), else None."""
    text = read_attr(path)
    if not text:
        return None
    try:
        return int(text, 16) if text.startswith("0x") else int(text)
    except ValueError:
        return None
