"""Growth of kernel counters between two reads, robust to wrap and reset."""

from __future__ import annotations

WRAP_32 = 2**32


def counter_delta(old: int, new: int, wrap_at: int | None = None) -> int:
    """How much a monotonic counter grew from ``old`` to ``new``.

    A counter that went backwards either wrapped or was reset. With
    ``wrap_at`` given and ``old`` below it, the counter is taken to be that
    wide and to have wrapped once; otherwise it was reset (driver reload,
    interface re-created) and counted up from 0, so the growth is ``new``.
    Either way the result is never negative.
    """
    if new >= old:
        return new - old
    if wrap_at is not None and old < wrap_at:
        return new + wrap_at - old
    return new


def rate(delta: int, dt: float) -> float:
    """Per-second rate; 0.0 when no time has passed (first sample, clock tie)."""
    return delta / dt if dt > 0 else 0.0
