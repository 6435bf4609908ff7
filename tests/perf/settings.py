"""Benchmark durations: the issue's, times $SPARKSYNC_PERF_SCALE (e.g. 0.05 for a smoke run)."""

from __future__ import annotations

import os
from dataclasses import dataclass

SCALE_ENV = "SPARKSYNC_PERF_SCALE"


def scale_from_env() -> float:
    text = os.environ.get(SCALE_ENV, "1")
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{SCALE_ENV} must be a number such as 0.05, got {text!r}") from None
    if not 0 < value <= 10:
        raise ValueError(f"{SCALE_ENV} must be in (0, 10], got {text!r}")
    return value


@dataclass(frozen=True)
class Durations:
    """One minute per CPU figure and ten for memory, as the issue asks, times the scale."""

    scale: float

    @property
    def warmup_s(self) -> float:  # imports and first-request work are not steady-state overhead
        return 10.0 * self.scale

    @property
    def cpu_s(self) -> float:
        return 60.0 * self.scale

    @property
    def memory_s(self) -> float:
        return 600.0 * self.scale

    @property
    def rss_every_s(self) -> float:
        return 10.0 * self.scale

    @property
    def total_s(self) -> float:
        """Rough wall time of all the runs together."""
        return self.memory_s + 2 * self.cpu_s + 3 * self.warmup_s

    @property
    def timeout_s(self) -> int:
        """Per-test timeout: generous, since the long run happens inside whichever test first needs it."""
        return int(self.total_s * 1.5) + 180
