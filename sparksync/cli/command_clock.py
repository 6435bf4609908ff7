"""When the running command started, so that a deadline (``node discover --timeout``) counts from there."""

from __future__ import annotations

import os
import time

import click

STARTED_KEY = "sparksync.started"


FRESH_PROCESS_S = 5.0  # a process younger than this was started for this command


def mark_started(ctx: click.Context) -> None:
    """Note when the command started (the root group calls this first thing).

    In a process started for the command that is when the process started:
    the interpreter's own start and the imports before this call count too.
    Where the command runs inside a longer-lived process (tests), it is now.
    """
    now = time.monotonic()
    age = _process_age_s()
    ctx.meta.setdefault(STARTED_KEY, now - age if age is not None and age < FRESH_PROCESS_S else now)


def _process_age_s() -> float | None:
    """Seconds since this process started (Linux: /proc), or None where that cannot be read."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            # Field 22 (starttime, clock ticks after boot); the command name in field 2 may hold spaces.
            fields = fh.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as fh:
            uptime = float(fh.read().split()[0])
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, uptime - started)


def command_started() -> float:
    """The monotonic time the running command started: a deadline counts from it, imports included."""
    ctx = click.get_current_context(silent=True)
    started = ctx.meta.get(STARTED_KEY) if ctx is not None else None
    return started if started is not None else time.monotonic()


def time_left(timeout: float) -> float:
    """Seconds left of a whole-command ``--timeout`` (counted from the command's start; may be negative)."""
    return timeout - (time.monotonic() - command_started())
