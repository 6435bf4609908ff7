"""The cluster in one line, for the tray: "6/8 online, 412 GB used, 38 tok/s", and its health.

Computed from what the app already holds: the node rows (paired nodes and
their live states) and the dashboard's latest figures. A node counts as
online when the fleet says so or when its telemetry arrived recently. Nodes
``apart`` from the cluster (this computer, once Sparks are paired) are not
counted: with one Spark paired the tray reads "1/1 online", not "2/2".
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sparksync.core.nodes.rows import NodeRow, NodeState
from sparksync.core.base.units import DEFAULT_MEMORY_UNIT, MemoryUnit, format_memory, format_tokens_per_s

FRESH_S = 10.0  # telemetry older than this does not make a node online


class Health(str, enum.Enum):
    ONLINE = "online"  # every node online
    DEGRADED = "degraded"  # some online, or one degraded
    OFFLINE = "offline"  # none online (or no node at all)


@dataclass(frozen=True)
class ClusterSummary:
    online: int
    total: int
    used_bytes: float | None
    tokens_per_s: float | None
    degraded: int = 0

    @property
    def health(self) -> Health:
        if self.total == 0 or self.online == 0:
            return Health.OFFLINE
        if self.online < self.total or self.degraded:
            return Health.DEGRADED
        return Health.ONLINE

    def text(self, unit: MemoryUnit = DEFAULT_MEMORY_UNIT) -> str:
        parts = [f"{self.online}/{self.total} online"]
        if self.used_bytes is not None:
            parts.append(f"{format_memory(self.used_bytes, unit)} used")
        if self.tokens_per_s is not None:
            parts.append(format_tokens_per_s(self.tokens_per_s))
        return ", ".join(parts)


def summarize(
    rows: Iterable[NodeRow],
    last_sample: Mapping[str, float],
    used_bytes: float | None,
    tokens_per_s: float | None,
    now: float | None = None,
    *,
    apart: Iterable[str] = (),
) -> ClusterSummary:
    """``last_sample``: node name -> Unix time of its latest telemetry sample (dashboard nodes)."""
    now = time.time() if now is None else now
    beside = set(apart)
    states = {r.name: r.state for r in rows if r.paired and r.name not in beside}
    names = set(states) | (set(last_sample) - beside)
    last_sample = {n: t for n, t in last_sample.items() if n not in beside}
    fresh = {n for n, t in last_sample.items() if now - t <= FRESH_S}
    online = {n for n in names if states.get(n) is NodeState.ONLINE or n in fresh}
    degraded = sum(1 for s in states.values() if s is NodeState.DEGRADED)
    return ClusterSummary(len(online), len(names), used_bytes, tokens_per_s, degraded)
