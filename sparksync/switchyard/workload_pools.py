"""Pools that follow running SparkSync workloads instead of fixed URLs.

A pool written as ``workload = "qwen-large"`` (a workload id, a recipe name or
a group id) takes as replicas the HTTP endpoints of the matching workloads in
the client's workload record (``sparksync workload start`` writes it). The
health loop asks this source every round, so a workload started, stopped or
restarted joins or leaves its pool without restarting the gateway.

An endpoint usually listens on its head node's loopback, so each one is
reached through a ``Reach``: an SSH tunnel per endpoint (kept open while the
endpoint stays, closed when it goes), or the node's address when the engine
binds beyond loopback. An endpoint that cannot be reached this round is left
out and tried again next round.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import ExitStack

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.workloads.reach import Reach, workload_endpoints
from sparksync.core.workloads.workload_store import Endpoint, WorkloadRecord
from sparksync.switchyard.config import SwitchyardConfig
from sparksync.switchyard.sources import PoolSource

log = logging.getLogger(__name__)

Records = Callable[[], Sequence[WorkloadRecord]]
_Key = tuple[str, str, int]  # node, host, port: one reach per place an engine listens


class WorkloadPools(PoolSource):
    """Static pools as written; workload pools from ``records()`` (e.g. ``WorkloadStore().list``)."""

    def __init__(self, config: SwitchyardConfig, records: Records, reach: Reach):
        self._static = {name: list(p.urls) for name, p in config.pools.items() if not p.workload}
        self._selectors = config.workload_pools()
        self._records, self._reach = records, reach
        self._open: dict[_Key, tuple[ExitStack, str]] = {}
        self._lock = threading.Lock()  # resolve() runs in a worker thread; close() from the owner

    async def replica_urls(self) -> dict[str, list[str]]:
        # Reading the record and opening tunnels block: keep them off the gateway's event loop.
        return await asyncio.to_thread(self.resolve)

    def resolve(self) -> dict[str, list[str]]:
        """Pool name -> replica URLs now; opens reaches for new endpoints and closes vanished ones."""
        records = list(self._records())
        wanted = {pool: workload_endpoints(records, sel) for pool, sel in self._selectors.items()}
        with self._lock:
            self._close_except({_key(e) for found in wanted.values() for e in found})
            urls = {pool: self._urls(pool, found) for pool, found in wanted.items()}
        return {**{p: list(u) for p, u in self._static.items()}, **urls}

    def reaching(self) -> int:
        """How many endpoints are held open (tunnels) now."""
        with self._lock:
            return len(self._open)

    def close(self) -> None:
        with self._lock:
            self._close_except(set())

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    # --- internals ----------------------------------------------------------------------

    def _urls(self, pool: str, endpoints: list[Endpoint]) -> list[str]:
        if not endpoints:
            log.warning("pool %s: no running workload matches %r", pool, self._selectors[pool])
        return [url for url in (self._url(pool, e) for e in endpoints) if url is not None]

    def _url(self, pool: str, endpoint: Endpoint) -> str | None:
        key = _key(endpoint)
        if key in self._open:
            return self._open[key][1]
        stack = ExitStack()
        try:
            url = stack.enter_context(self._reach(endpoint))
        except SparkSyncError as exc:
            stack.close()
            log.warning("pool %s: cannot reach %s on %s yet: %s", pool, endpoint.group, endpoint.node, exc)
            return None
        log.info("pool %s: replica %s on %s at %s", pool, endpoint.group, endpoint.node, url)
        self._open[key] = (stack, url)
        return url

    def _close_except(self, keep: set[_Key]) -> None:
        for key in [k for k in self._open if k not in keep]:
            stack, url = self._open.pop(key)
            log.info("replica at %s (%s:%s on %s) is gone; closing its way in", url, key[1], key[2], key[0])
            stack.close()


def _key(endpoint: Endpoint) -> _Key:
    return (endpoint.node, endpoint.host, endpoint.port)
