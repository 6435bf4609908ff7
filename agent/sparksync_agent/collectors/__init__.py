"""Telemetry collectors.

Each collector fills one field of :class:`~sparksync_agent.protocol.Sample`
(``field``). A collector that raises is logged once and disabled, and the
agent keeps serving: one broken sysfs file must never take the node's
telemetry down with it.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import Any

from sparksync_agent.protocol import CollectorState

log = logging.getLogger(__name__)


class Collector(ABC):
    """One source of telemetry.

    ``sample(now)`` returns the value for ``Sample.<field>`` (or None when the
    node simply has none, e.g. no RDMA); ``now`` is a monotonic clock reading
    that rate computations use.
    """

    name: str = "collector"
    field: str = ""

    @abstractmethod
    def sample(self, now: float) -> Any: ...

    def close(self) -> None:
        """Release what the collector holds (NVML handles and such)."""


class CollectorSet:
    """Runs the collectors for one sample and disables any that fail."""

    def __init__(self, collectors: list[Collector]):
        self._active = list(collectors)
        self._disabled: dict[str, str] = {}
        self._names = [c.name for c in collectors]

    def collect(self, now: float) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for collector in list(self._active):
            try:
                values[collector.field] = collector.sample(now)
            except Exception as exc:  # noqa: BLE001 - any failure disables just this collector
                self._disable(collector, exc)
        return values

    def states(self) -> list[CollectorState]:
        return [
            CollectorState(name=name, enabled=name not in self._disabled, reason=self._disabled.get(name))
            for name in self._names
        ]

    def close(self) -> None:
        for collector in self._active:
            try:
                collector.close()
            except Exception:  # noqa: BLE001 - closing must not stop shutdown
                log.debug("closing collector %s failed", collector.name, exc_info=True)

    def _disable(self, collector: Collector, exc: Exception) -> None:
        reason = f"{type(exc).__name__}: {exc}"
        log.warning("collector %s failed and is disabled: %s", collector.name, reason)
        self._disabled[collector.name] = reason
        self._active.remove(collector)
        try:
            collector.close()
        except Exception:  # noqa: BLE001
            pass
