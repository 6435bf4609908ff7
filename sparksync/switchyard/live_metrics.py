"""A gateway's /metrics, read back: per-pool counters from one scrape, and live figures from two.

One scrape gives counters that only grow (requests, errors, output tokens,
the TTFT histogram's buckets) and the gauges the gateway computes when
scraped (the share since it started, tokens/s over its last 10 s, replica
states). Two scrapes of the same gateway give what happened between them:
the split of the requests answered meanwhile and their TTFT p50, which is
what a live view wants rather than figures averaged since the gateway began.

The text is parsed by ``prometheus_client.parser``; nothing here does I/O
(``gateway_watch`` scrapes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from sparksync.switchyard.errors import SwitchyardError

# The family names as the parser reports them (it strips a counter's "_total").
REQUESTS = "switchyard_requests"
ERRORS = "switchyard_errors"
TOKENS = "switchyard_output_tokens"
TTFT = "switchyard_ttft_seconds"
SHARE = "switchyard_share"
RATE = "switchyard_tokens_per_second"
REPLICA_UP = "switchyard_replica_up"


class NotAGatewayError(SwitchyardError):
    """The address answered, but not with a Switchyard gateway's metrics."""


@dataclass
class PoolCounters:
    """One pool's figures in one scrape; every count is cumulative since the gateway started."""

    requests: float = 0.0
    failed: float = 0.0  # requests whose final answer was an error
    errors: float = 0.0  # failed attempts (connect errors, 5xx, broken streams), retried or not
    output_tokens: float = 0.0
    share: float = 0.0
    tokens_per_s: float = 0.0
    ttft_buckets: dict[float, float] = field(default_factory=dict)  # upper bound -> cumulative count
    replicas: int = 0
    replicas_up: int = 0

    @property
    def ttft_count(self) -> float:
        return self.ttft_buckets.get(math.inf, 0.0)


@dataclass
class Scrape:
    at: float  # seconds on the caller's clock (time.monotonic for rates)
    pools: dict[str, PoolCounters]


def parse_metrics(text: str, at: float) -> Scrape:
    """The Switchyard figures in a Prometheus text exposition; NotAGatewayError when it holds none."""
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as exc:
        raise NotAGatewayError(f"its /metrics is not Prometheus text ({exc})") from None
    if not any(f.name == SHARE for f in families):
        raise NotAGatewayError(
            "its /metrics has no switchyard_share figures, so it is not a Switchyard gateway"
        )
    # The share lists every pool in the config's order: the order a view shows them in.
    pools = {s.labels["pool"]: PoolCounters() for f in families if f.name == SHARE for s in f.samples}
    for family in families:
        for sample in family.samples:
            pool = sample.labels.get("pool")
            if pool is not None:
                _take(pools.setdefault(pool, PoolCounters()), family.name, sample)
    return Scrape(at, pools)


def _take(pool: PoolCounters, family: str, sample) -> None:
    name, labels, value = sample.name, sample.labels, sample.value
    if family == REQUESTS and name.endswith("_total"):
        pool.requests += value
        if labels.get("outcome") == "error":
            pool.failed += value
    elif family == ERRORS and name.endswith("_total"):
        pool.errors += value
    elif family == TOKENS and name.endswith("_total"):
        pool.output_tokens += value
    elif family == TTFT and name.endswith("_bucket"):
        pool.ttft_buckets[float(labels["le"])] = value
    elif family == SHARE:
        pool.share = value
    elif family == RATE:
        pool.tokens_per_s = value
    elif family == REPLICA_UP:
        pool.replicas += 1
        pool.replicas_up += value >= 1


def quantile(q: float, buckets: dict[float, float]) -> float | None:
    """The q-quantile of a cumulative histogram, interpolated in its bucket as Prometheus does.

    The first bucket's lower edge is 0; a rank that lands in the +Inf bucket
    gives the highest finite edge (nothing finer is known). None without
    observations.
    """
    edges = sorted(buckets)
    total = buckets.get(math.inf, buckets[edges[-1]] if edges else 0.0)
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for edge in edges:
        count = buckets[edge]
        if count >= rank:
            if math.isinf(edge):
                return lower
            inside = count - below
            return lower + (edge - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = edge, count
    return lower


@dataclass(frozen=True)
class PoolLive:
    """What a live view shows for one pool."""

    name: str
    requests: int  # answered since the gateway started
    failed: int
    errors: int
    share: float  # of all answered requests since the gateway started
    output_tokens: int
    tokens_per_s: float  # the gateway's own figure, over its last 10 s
    replicas_up: int
    replicas: int
    recent_requests: int  # answered between the two scrapes
    recent_share: float | None  # of the requests answered between the scrapes; None when none were
    ttft_p50_s: float | None
    ttft_recent: bool  # True: the p50 is of the streams between the scrapes; False: since the start


@dataclass(frozen=True)
class GatewayLive:
    pools: dict[str, PoolLive]
    window_s: float  # the time between the two scrapes (0 with only one)

    @property
    def requests(self) -> int:
        return sum(p.requests for p in self.pools.values())

    @property
    def recent_requests(self) -> int:
        return sum(p.recent_requests for p in self.pools.values())

    @property
    def tokens_per_s(self) -> float:
        return sum(p.tokens_per_s for p in self.pools.values())


def live_figures(now: Scrape, then: Scrape | None = None) -> GatewayLive:
    """The figures of ``now``, with what changed since ``then`` (an earlier scrape of the same gateway).

    A gateway restarted between the scrapes has counters lower than before:
    ``then`` is then ignored, as if this were the first scrape.
    """
    if then is not None and _restarted(now, then):
        then = None
    recent = {name: _delta(p, then.pools.get(name) if then else None) for name, p in now.pools.items()}
    recent_total = sum(count for count, _ in recent.values()) if then is not None else 0
    pools = {}
    for name, p in now.pools.items():
        count, buckets = recent[name]
        has_recent = then is not None and buckets.get(math.inf, 0.0) > 0
        pools[name] = PoolLive(
            name=name,
            requests=round(p.requests),
            failed=round(p.failed),
            errors=round(p.errors),
            share=p.share,
            output_tokens=round(p.output_tokens),
            tokens_per_s=p.tokens_per_s,
            replicas_up=p.replicas_up,
            replicas=p.replicas,
            recent_requests=round(count) if then is not None else 0,
            recent_share=count / recent_total if recent_total else None,
            ttft_p50_s=quantile(0.5, buckets if has_recent else p.ttft_buckets),
            ttft_recent=has_recent,
        )
    return GatewayLive(pools, now.at - then.at if then is not None else 0.0)


def _delta(now: PoolCounters, then: PoolCounters | None) -> tuple[float, dict[float, float]]:
    if then is None:
        return now.requests, dict(now.ttft_buckets)
    buckets = {edge: count - then.ttft_buckets.get(edge, 0.0) for edge, count in now.ttft_buckets.items()}
    return now.requests - then.requests, buckets


def _restarted(now: Scrape, then: Scrape) -> bool:
    for name, before in then.pools.items():
        after = now.pools.get(name)
        if after is None or after.requests < before.requests or after.ttft_count < before.ttft_count:
            return True
    return False
