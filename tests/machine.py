"""Facts about the machine the tests run on, read the way a user would check them."""

from __future__ import annotations


def mem_total_bytes() -> int:
    """MemTotal from /proc/meminfo, in bytes."""
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no MemTotal in /proc/meminfo")
