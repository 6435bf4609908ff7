"""Where the replica URLs of each pool come from.

The config's plain URLs (``StaticUrls``), or pools picked up from running
SparkSync workloads (``workload_pools.WorkloadPools``): that source answers
the same question from the client's workload record, and the health loop
asks it every round, so replicas that appear or vanish join or leave their
pool without a restart.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from sparksync.switchyard.config import SwitchyardConfig


class PoolSource(ABC):
    @abstractmethod
    async def replica_urls(self) -> dict[str, list[str]]:
        """Pool name -> base URLs of its replicas right now."""

    async def aclose(self) -> None:
        """Release what the source holds (tunnels...) when the gateway stops."""


class StaticUrls(PoolSource):
    """The URLs written in the config file; they never change while the gateway runs."""

    def __init__(self, urls: dict[str, list[str]]):
        self._urls = {pool: list(u) for pool, u in urls.items()}

    @classmethod
    def from_config(cls, config: SwitchyardConfig) -> StaticUrls:
        return cls({name: pool.urls for name, pool in config.pools.items() if not pool.workload})

    async def replica_urls(self) -> dict[str, list[str]]:
        return {pool: list(u) for pool, u in self._urls.items()}
