"""Active health checks: every few seconds, ask each replica whether it can serve.

A replica that fails its check leaves the rotation at once (before any
client request has to fail on it); one that passes again comes back.
Each round also asks the PoolSource for the current replica lists.
"""

from __future__ import annotations

import asyncio
import logging

import httpx

from sparksync.switchyard.config import HealthConfig
from sparksync.switchyard.pools import PoolSet, Replica
from sparksync.switchyard.sources import PoolSource

log = logging.getLogger(__name__)


class HealthChecker:
    def __init__(self, pools: PoolSet, source: PoolSource, config: HealthConfig, client: httpx.AsyncClient):
        self._pools = pools
        self._source = source
        self._config = config
        self._client = client

    async def run_forever(self) -> None:
        """Check every interval; the gateway runs the first round itself before it serves."""
        while True:
            await asyncio.sleep(self._config.interval_s)
            await self.check_once()

    async def check_once(self) -> None:
        try:
            self._pools.apply(await self._source.replica_urls())
        except Exception:  # a broken source must not stop the checks of the replicas we know
            log.exception("the pool source failed; keeping the current replica lists")
        # One probe per URL: a replica serving two pools (one engine for both) is asked once.
        by_url: dict[str, list[Replica]] = {}
        for _, replica in self._pools.all_replicas():
            by_url.setdefault(replica.url, []).append(replica)
        await asyncio.gather(*(self._check(url, replicas) for url, replicas in by_url.items()))

    async def _check(self, url: str, replicas: list[Replica]) -> None:
        error = await self._probe(url)
        if any((error is None) != r.healthy for r in replicas):
            if error is None:
                log.info("replica %s passes its health check again", url)
            else:
                log.warning("replica %s fails its health check: %s", url, error)
        for replica in replicas:
            replica.healthy = error is None
            if error is not None:
                replica.last_error = error

    async def _probe(self, url: str) -> str | None:
        """None when healthy, else what went wrong."""
        try:
            response = await self._client.get(url + self._config.path, timeout=self._config.timeout_s)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if response.status_code != 200:
            return f"health check answered HTTP {response.status_code}"
        return None
