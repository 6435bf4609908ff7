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
        replicas = [r for _, r in self._pools.all_replicas()]
        await asyncio.gather(*(self._check(r) for r in replicas))

    async def _check(self, replica: Replica) -> None:
        error = await self._probe(replica.url)
        if (error is None) != replica.healthy:
            if error is None:
                log.info("replica %s passes its health check again", replica.url)
            else:
                log.warning("replica %s fails its health check: %s", replica.url, error)
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
