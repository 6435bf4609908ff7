"""Process identity that survives pid reuse: a pid plus its start time from /proc.

A pid alone may name a different process after the original one exits; the
start time (in clock ticks since boot, field 22 of /proc/<pid>/stat) never
repeats for the same pid within one boot.
"""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc")


def start_ticks(pid: int, proc_root: Path = PROC) -> int | None:
    """The process's start time in clock ticks since boot; None when it is gone."""
    try:
        stat = (proc_root / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may hold spaces and parentheses; fields after it are plain.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # a zombie has exited; only its parent's wait() is left
        return None
    return int(fields[19])


def same_process(pid: int, ticks: int, proc_root: Path = PROC) -> bool:
    """True while the process started as (pid, ticks) is alive."""
    return start_ticks(pid, proc_root) == ticks
