"""Replica choice, the circuit breaker and the pool source, without any network."""

from __future__ import annotations

import asyncio

from sparksync.switchyard.breaker import BreakerState, CircuitBreaker
from sparksync.switchyard.config import BreakerConfig
from sparksync.switchyard.pools import Pool, PoolSet
from sparksync.switchyard.sources import StaticUrls


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pool(*urls: str) -> Pool:
    p = Pool("p", "m", BreakerConfig(failures=2, cooldown_s=5))
    p.set_urls(list(urls))
    return p


def test_least_outstanding_wins_and_ties_take_turns():
    p = pool("http://a", "http://b", "http://c")
    a, b, c = p.replicas
    a.outstanding, b.outstanding, c.outstanding = 2, 0, 1
    assert p.pick() is b
    b.outstanding = 5
    assert p.pick() is c
    for r in p.replicas:
        r.outstanding = 0
    assert {p.pick().url for _ in range(3)} == {"http://a", "http://b", "http://c"}


def test_unavailable_and_excluded_replicas_are_skipped():
    p = pool("http://a", "http://b")
    a, b = p.replicas
    a.healthy = False
    assert p.pick() is b and p.pick(exclude=[b]) is None
    assert p.has_available()
    b.healthy = False
    assert p.pick() is None and not p.has_available()
    assert "failing health checks" in p.status_line()


def test_breaker_opens_after_consecutive_failures_then_admits_one_trial():
    clock = Clock()
    breaker = CircuitBreaker(failures=2, cooldown_s=5, clock=clock)
    breaker.on_failure()
    assert breaker.state is BreakerState.CLOSED and breaker.allows()
    breaker.on_failure()
    assert breaker.state is BreakerState.OPEN and not breaker.allows()
    clock.now += 5
    assert breaker.state is BreakerState.HALF_OPEN and breaker.allows()
    breaker.on_attempt()
    assert not breaker.allows()  # one trial at a time
    breaker.on_failure()
    assert breaker.state is BreakerState.OPEN  # the failed trial restarts the cooldown
    clock.now += 5
    breaker.on_attempt()
    breaker.on_success()
    assert breaker.state is BreakerState.CLOSED and breaker.allows()


def test_success_resets_the_failure_count():
    breaker = CircuitBreaker(failures=2, cooldown_s=5, clock=Clock())
    breaker.on_failure()
    breaker.on_success()
    breaker.on_failure()
    assert breaker.state is BreakerState.CLOSED


def test_abandoned_trial_frees_the_slot():
    clock = Clock()
    breaker = CircuitBreaker(failures=1, cooldown_s=1, clock=clock)
    breaker.on_failure()
    clock.now += 1
    breaker.on_attempt()
    breaker.on_abandoned()
    assert breaker.allows()


def test_new_urls_keep_the_state_of_replicas_that_stay():
    p = pool("http://a", "http://b")
    a = p.replicas[0]
    a.outstanding = 3
    p.set_urls(["http://c", "http://a", "http://a"])
    assert [r.url for r in p.replicas] == ["http://c", "http://a"]
    assert p.replicas[1] is a and a.outstanding == 3


def test_pool_set_applies_a_static_source():
    pools = PoolSet({"small": "m1", "large": "m2"}, BreakerConfig())
    source = StaticUrls({"small": ["http://s1", "http://s2"], "large": ["http://l1"], "other": ["http://x"]})
    pools.apply(asyncio.run(source.replica_urls()))
    assert [r.url for r in pools["small"].replicas] == ["http://s1", "http://s2"]
    assert [r.url for r in pools["large"].replicas] == ["http://l1"]
    assert "other" not in pools
