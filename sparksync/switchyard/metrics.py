"""Per-pool figures on /metrics: requests, the share routed, TTFT, tokens/s, errors.

Each gateway has its own registry (tests run several at once). The share and
the replica states are computed when scraped, from the same counters the
requests update, so they can never disagree.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from sparksync.switchyard.pools import PoolSet

TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
RATE_WINDOW_S = 10.0
# How long an answer's bookkeeping may wait. It runs when the gateway would be idle anyway
# (while the engine computes), not between the answer's last byte and the client's next
# request, where each microsecond adds to what the client waits for.
DEFER_S = 0.005


class RateWindow:
    """Tokens per second over the last ``window_s`` seconds: the live figure a dashboard plots."""

    def __init__(self, window_s: float = RATE_WINDOW_S):
        self.window_s = window_s
        self._events: deque[tuple[float, int]] = deque()

    def add(self, tokens: int, now: float | None = None) -> None:
        self._events.append((time.monotonic() if now is None else now, tokens))

    def rate(self, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        while self._events and self._events[0][0] < now - self.window_s:
            self._events.popleft()
        return sum(tokens for _, tokens in self._events) / self.window_s


class GatewayMetrics:
    def __init__(self, pools: PoolSet):
        self.registry = CollectorRegistry()
        self.pools = pools
        r = self.registry
        self.requests = Counter(
            "switchyard_requests",
            "Requests answered, by the pool that gave the final answer",
            ["pool", "outcome"],
            registry=r,
        )
        self.routed = Counter(
            "switchyard_routed", "Routing choices, by pool and by what chose it", ["pool", "via"], registry=r
        )
        self.errors = Counter(
            "switchyard_errors", "Failed attempts and failed requests", ["pool", "kind"], registry=r
        )
        self.retries = Counter(
            "switchyard_retries", "Attempts retried on another replica", ["pool"], registry=r
        )
        self.escalations = Counter(
            "switchyard_escalations",
            "Cascade answers that failed validation",
            ["from_pool", "to_pool"],
            registry=r,
        )
        self.ttft = Histogram(
            "switchyard_ttft_seconds",
            "Time to first output token (streams)",
            ["pool"],
            buckets=TTFT_BUCKETS,
            registry=r,
        )
        self.tokens = Counter("switchyard_output_tokens", "Output tokens delivered", ["pool"], registry=r)
        for metric in (self.requests, self.routed, self.tokens, self.ttft):
            _keep_children(metric)
        self.windows = {name: RateWindow() for name in pools.names()}
        self._answered = {name: 0 for name in pools.names()}
        self._pending: list[Callable[[], None]] = []
        self._flush_timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        r.register(_LiveCollector(self))

    def defer(self, record: Callable[[], None]) -> None:
        """Run ``record`` a moment later; every read of the figures runs what is pending first."""
        self._pending.append(record)
        if self._flush_timer is None:
            if self._loop is None:  # (looked up once: a getpid() system call on Python 3.11)
                self._loop = asyncio.get_running_loop()
            self._flush_timer = self._loop.call_later(DEFER_S, self.flush)

    def flush(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        pending, self._pending = self._pending, []
        for record in pending:
            record()

    def answered(self, pool: str, ok: bool, tokens: int, ttft_s: float | None) -> None:
        self.requests.labels(pool, "ok" if ok else "error").inc()
        self._answered[pool] = self._answered.get(pool, 0) + 1
        if tokens:
            self.tokens.labels(pool).inc(tokens)
            self.windows[pool].add(tokens)
        if ttft_s is not None:
            self.ttft.labels(pool).observe(ttft_s)

    def shares(self) -> dict[str, float]:
        self.flush()
        total = sum(self._answered.values())
        return {pool: (n / total if total else 0.0) for pool, n in self._answered.items()}

    def exposition(self) -> bytes:
        self.flush()
        return generate_latest(self.registry)


def _keep_children(metric) -> None:
    """Make ``metric.labels(...)`` return the child it gave before for the same values.

    prometheus_client's ``labels`` checks and copies the values and takes a
    lock at each call, and every request calls it for several metrics; the
    children never change for given values (the gateway removes none), so
    each is looked up once.
    """
    children: dict[tuple[str, ...], object] = {}
    make = metric.labels

    def labels(*values: str):
        child = children.get(values)
        if child is None:
            child = children[values] = make(*values)
        return child

    metric.labels = labels


class _LiveCollector(Collector):
    """Figures computed at scrape time."""

    def __init__(self, metrics: GatewayMetrics):
        self._m = metrics

    def collect(self):
        share = GaugeMetricFamily(
            "switchyard_share", "Fraction of answered requests per pool", labels=["pool"]
        )
        rate = GaugeMetricFamily(
            "switchyard_tokens_per_second",
            f"Output tokens/s over the last {RATE_WINDOW_S:g} s",
            labels=["pool"],
        )
        for pool, value in self._m.shares().items():
            share.add_metric([pool], value)
            rate.add_metric([pool], self._m.windows[pool].rate())
        up = GaugeMetricFamily(
            "switchyard_replica_up", "1 when the replica takes requests", labels=["pool", "replica"]
        )
        busy = GaugeMetricFamily(
            "switchyard_replica_outstanding", "Requests in flight", labels=["pool", "replica"]
        )
        for pool, replica in self._m.pools.all_replicas():
            up.add_metric([pool.name, replica.url], 1.0 if replica.available else 0.0)
            busy.add_metric([pool.name, replica.url], replica.outstanding)
        yield from (share, rate, up, busy)
