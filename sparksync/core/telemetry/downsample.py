"""One row per second from samples that come at up to 10 Hz.

The long-term history and the 1-hour view need one row per node per second,
not ten. ``SecondAverager`` averages each series over a wall-clock second
and hands out the row when the first sample of a later second arrives (or on
``flush``). A value missing from some samples is averaged over the samples
that had it; one missing from all of them stays missing (never 0).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class SecondRow:
    """The mean of each series over the second starting at ``t`` (Unix time, whole seconds)."""

    t: int
    values: dict[str, float]


class SecondAverager:
    def __init__(self) -> None:
        self._second: int | None = None
        self._sums: dict[str, float] = {}
        self._counts: dict[str, int] = {}

    def add(self, t: float, values: Mapping[str, float]) -> SecondRow | None:
        """Add one sample; returns the finished row of an earlier second, if this one ends it."""
        second = math.floor(t)
        done = self.flush() if self._second is not None and second > self._second else None
        if self._second is None:
            self._second = second
        for name, value in values.items():
            if math.isfinite(value):
                self._sums[name] = self._sums.get(name, 0.0) + value
                self._counts[name] = self._counts.get(name, 0) + 1
        return done

    def flush(self) -> SecondRow | None:
        """The row of the second in progress (None when empty), and start afresh."""
        if self._second is None:
            return None
        row = SecondRow(self._second, {k: s / self._counts[k] for k, s in self._sums.items()})
        self._second, self._sums, self._counts = None, {}, {}
        return row
