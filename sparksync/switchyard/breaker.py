"""A circuit breaker per replica: consecutive failures take it out of rotation for a while.

Closed: requests flow. After ``failures`` consecutive failures it opens and the
replica gets no request for ``cooldown_s``. Then it is half-open: one trial
request may go; its success closes the breaker, its failure opens it again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import Enum


class BreakerState(str, Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    def __init__(self, failures: int, cooldown_s: float, clock: Callable[[], float] = time.monotonic):
        self._threshold = failures
        self._cooldown_s = cooldown_s
        self._clock = clock
        self._consecutive = 0
        self._opened_at: float | None = None
        self._trial_in_flight = False

    @property
    def state(self) -> BreakerState:
        if self._opened_at is None:
            return BreakerState.CLOSED
        if self._clock() - self._opened_at < self._cooldown_s:
            return BreakerState.OPEN
        return BreakerState.HALF_OPEN

    def allows(self) -> bool:
        """Whether a request may go now (a half-open breaker admits one trial at a time)."""
        state = self.state
        return state is BreakerState.CLOSED or (state is BreakerState.HALF_OPEN and not self._trial_in_flight)

    def on_attempt(self) -> None:
        if self.state is BreakerState.HALF_OPEN:
            self._trial_in_flight = True

    def on_success(self) -> None:
        self._consecutive = 0
        self._opened_at = None
        self._trial_in_flight = False

    def on_failure(self) -> None:
        self._consecutive += 1
        self._trial_in_flight = False
        if self._opened_at is not None or self._consecutive >= self._threshold:
            self._opened_at = self._clock()  # (re)open: a failed trial restarts the cooldown

    def on_abandoned(self) -> None:
        """The attempt ended without a verdict (the client left): free the trial slot."""
        self._trial_in_flight = False
