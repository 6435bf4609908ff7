"""The one retry schedule: growth to a cap, jitter that only shortens, a fresh start after success."""

from __future__ import annotations

import itertools
import random

from sparksync.core.base.backoff import Backoff


def test_backoff_grows_to_its_cap_and_jitter_only_shortens():
    backoff = Backoff(first_s=1.0, factor=2.0, max_s=8.0, jitter=0.5)
    rng = random.Random(7)
    for attempt, base in enumerate([1, 2, 4, 8, 8, 8]):
        delays = [backoff.delay(attempt, rng) for _ in range(50)]
        assert all(base * 0.5 <= d <= base for d in delays)
        assert len(set(delays)) > 40  # spread out, so nodes do not retry in lockstep
    assert backoff.delay(10_000, rng) <= 8.0


def test_no_jitter_gives_the_plain_schedule():
    backoff = Backoff(first_s=0.5, factor=3.0, max_s=100.0, jitter=0.0)
    assert [backoff.delay(n) for n in range(4)] == [0.5, 1.5, 4.5, 13.5]


def test_delays_walk_the_schedule_and_a_new_iterator_starts_over():
    backoff = Backoff(first_s=0.25, factor=2.0, max_s=2.0)
    delays = backoff.delays()
    assert list(itertools.islice(delays, 6)) == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    assert next(backoff.delays()) == 0.25
