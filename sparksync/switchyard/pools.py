"""Pools of replicas and the choice of a replica for each attempt.

A replica is available when its last health check passed and its circuit
breaker admits a request. Among the available ones a pool picks the one
with the fewest requests outstanding; ties go to the one picked least
recently, so equal replicas take turns.

All of this runs on the gateway's one event loop, so plain counters need no lock.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

from sparksync.switchyard.breaker import BreakerState, CircuitBreaker
from sparksync.switchyard.config import BreakerConfig

_pick_counter = itertools.count(1)


@dataclass(eq=False)
class Replica:
    url: str
    breaker: CircuitBreaker
    outstanding: int = 0
    # Optimistic until the first health check: a fresh gateway must not refuse its first requests.
    healthy: bool = True
    last_error: str | None = None
    last_picked: int = 0

    @property
    def available(self) -> bool:
        return self.healthy and self.breaker.allows()

    def describe(self) -> str:
        state = "up" if self.healthy else "failing health checks"
        if self.breaker.state is not BreakerState.CLOSED:
            state += f", breaker {self.breaker.state.value}"
        return f"{self.url} ({state})" + (f": {self.last_error}" if self.last_error else "")


@dataclass(eq=False)
class Pool:
    name: str
    model: str
    breaker_config: BreakerConfig
    replicas: list[Replica] = field(default_factory=list)

    def pick(self, exclude: Iterable[Replica] = ()) -> Replica | None:
        """The available replica with the fewest outstanding requests, or None."""
        skip = set(map(id, exclude))
        candidates = [r for r in self.replicas if r.available and id(r) not in skip]
        if not candidates:
            return None
        chosen = min(candidates, key=lambda r: (r.outstanding, r.last_picked))
        chosen.last_picked = next(_pick_counter)
        return chosen

    def has_available(self) -> bool:
        return any(r.available for r in self.replicas)

    def set_urls(self, urls: list[str]) -> None:
        """Match the replica list to ``urls``, keeping the state of replicas that stay."""
        current = {r.url: r for r in self.replicas}
        self.replicas = [current.get(url) or self._new_replica(url) for url in dict.fromkeys(urls)]

    def _new_replica(self, url: str) -> Replica:
        return Replica(url, CircuitBreaker(self.breaker_config.failures, self.breaker_config.cooldown_s))

    def status_line(self) -> str:
        return "; ".join(r.describe() for r in self.replicas) or "no replicas"


class PoolSet:
    """The gateway's pools, by name."""

    def __init__(self, models: dict[str, str], breaker: BreakerConfig):
        self.pools = {name: Pool(name, model, breaker) for name, model in models.items()}

    def __getitem__(self, name: str) -> Pool:
        return self.pools[name]

    def __contains__(self, name: object) -> bool:
        return name in self.pools

    def names(self) -> list[str]:
        return list(self.pools)

    def apply(self, urls: dict[str, list[str]]) -> None:
        """Take a PoolSource's answer; a pool the source does not mention keeps its replicas."""
        for name, pool_urls in urls.items():
            if name in self.pools:
                self.pools[name].set_urls(pool_urls)

    def all_replicas(self) -> list[tuple[Pool, Replica]]:
        return [(pool, r) for pool in self.pools.values() for r in pool.replicas]
