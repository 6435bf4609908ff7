"""Waiting between retries: one delay schedule for every reconnect loop in the client.

``Backoff(first_s, factor, max_s, jitter)`` gives the delay before retry
``n`` as ``first_s * factor**n`` capped at ``max_s``, minus up to ``jitter``
of it at random, so that eight nodes coming back at once do not all retry in
lockstep. The SSH transports, the telemetry stream and the telemetry
follower all wait this way; each picks its own numbers.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """Delay before retry n: ``first_s * factor**n`` capped at ``max_s``, minus up to ``jitter`` of it."""

    first_s: float = 0.5
    factor: float = 2.0
    max_s: float = 30.0
    jitter: float = 0.0

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        base = min(self.max_s, self.first_s * self.factor ** min(max(attempt, 0), 64))
        if not self.jitter:
            return base
        return base * (1.0 - self.jitter * (rng or random).random())

    def delays(self, rng: random.Random | None = None) -> Iterator[float]:
        """The delays of retry 0, 1, 2, ... (start a new iterator after a success)."""
        attempt = 0
        while True:
            yield self.delay(attempt, rng)
            attempt += 1
