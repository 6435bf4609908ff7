"""What the dashboard plots, kept in Qt-free numpy ring buffers.

Each node has two tiers of rows:

- ``raw``: every sample, for the last 10 minutes at up to 10 Hz;
- ``coarse``: one row per second (the mean), for the last hour. It is also
  what the history store keeps, and what a reopened app reloads.

A window query takes the raw rows it covers and, before the oldest raw row,
the coarse ones, so a 1-hour view or a freshly reopened app still shows the
whole window. The pseudo-node ``CLUSTER`` holds the cluster's memory used
and capacity (the sums over the nodes' latest samples: the capacity is
computed from MemTotal, never assumed) and the workloads' tokens/s: each
workload's from its ranks' figures in the samples (or a benchmark's), and
their total. Nodes set ``apart`` (this computer, once Sparks are paired)
are plotted beside the cluster but left out of its sums.

A ``Gap`` (the agent restarted, or samples were lost) is kept for the view
to mark on the timeline, and breaks the node's lines there.

The model is fed from the GUI thread (or any single thread) and does no I/O:
finished one-second rows go to ``row_listeners``, e.g. the history recorder's
queue.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_module
from sparksync.core.telemetry.dashboard_series import (
    CLUSTER,
    MEMORY_TOTAL,
    MEMORY_USED,
    TOKENS_TOTAL,
    sample_values,
    split_name,
    tokens_series,
)
from sparksync.core.telemetry.downsample import SecondAverager, SecondRow
from sparksync.core.telemetry.series import SeriesBuffer

if TYPE_CHECKING:
    import numpy as np
    from sparksync_agent.protocol import Sample
else:
    np = lazy_module("numpy")  # the window paints before there is a sample to store

RAW_SPAN_S = 600  # the longest window drawn from raw samples
MAX_SAMPLE_HZ = 10  # the agent samples at 10 Hz at most
RAW_CAPACITY = int(RAW_SPAN_S * MAX_SAMPLE_HZ * 1.1)
COARSE_SPAN_S = 3600  # the longest window, and what a reopened app reloads
COARSE_CAPACITY = int(COARSE_SPAN_S * 1.1)
CLUSTER_STEP_S = 0.1  # cluster rows at 10 Hz at most, however many nodes report
STALE_S = 10.0  # a node silent this long no longer counts in the cluster's sums

MAX_GAPS = 200  # the newest gaps kept for the timeline
RowListener = Callable[[str, SecondRow], None]


@dataclass(frozen=True)
class Gap:
    """No samples from ``node`` between ``start`` and ``end`` (Unix times), and why."""

    node: str
    start: float
    end: float
    reason: str


@dataclass
class NodeHistory:
    """Columns of one-second rows: ``t`` (Unix seconds, growing) and one array per series."""

    t: np.ndarray
    values: dict[str, np.ndarray] = field(default_factory=dict)


class NodeSeries:
    """One node's (or the cluster's) series, raw and per second."""

    def __init__(self, raw_capacity: int, coarse_capacity: int):
        self.raw = SeriesBuffer(raw_capacity, ("t",))
        self.coarse = SeriesBuffer(coarse_capacity, ("t",))
        self.names: list[str] = []  # in order of appearance
        self.latest: dict[str, float] = {}
        self.latest_ts = -math.inf
        self._averager = SecondAverager()

    @property
    def last_t(self) -> float:
        return float(self.raw.column("t")[-1]) if len(self.raw) else -math.inf

    def append(self, t: float, values: Mapping[str, float]) -> SecondRow | None:
        """Add one row; returns a finished one-second row when this one ends a second."""
        for name in values:
            self._ensure(name)
        self.raw.append({"t": t, **values})
        self.latest, self.latest_ts = dict(values), t
        row = self._averager.add(t, values)
        if row is not None:
            self._append_coarse(row)
        return row

    def flush(self) -> SecondRow | None:
        row = self._averager.flush()
        if row is not None:
            self._append_coarse(row)
        return row

    def window(self, name: str, t0: float) -> tuple[np.ndarray, np.ndarray]:
        """Times and values from ``t0`` on: coarse rows before the oldest raw row, then raw rows."""
        raw_t = self.raw.column("t")
        start = int(np.searchsorted(raw_t, t0))
        x, y = raw_t[start:], self._column(self.raw, name)[start:]
        raw_first = raw_t[0] if len(raw_t) else math.inf
        if raw_first <= t0 or not len(self.coarse):
            return x, y
        coarse_t = self.coarse.column("t")
        # A coarse row covers [t, t + 1): only whole seconds before the raw rows, never both.
        a, b = np.searchsorted(coarse_t, t0), np.searchsorted(coarse_t, raw_first - 1, side="right")
        if b <= a:
            return x, y
        return np.concatenate([coarse_t[a:b], x]), np.concatenate([self._column(self.coarse, name)[a:b], y])

    def merge_history(self, history: NodeHistory) -> None:
        """Put one-second rows from the history store before the ones this session made."""
        for name in history.values:
            self._ensure(name)
        ours = self.coarse.column("t")
        first = ours[0] if len(ours) else math.inf
        keep = history.t < first
        merged = SeriesBuffer(self.coarse.capacity, self.coarse.columns)
        merged.extend({"t": history.t[keep], **{n: v[keep] for n, v in history.values.items()}})
        merged.extend({n: self.coarse.column(n) for n in self.coarse.columns})
        merged.version = self.coarse.version + 1
        self.coarse = merged

    def _append_coarse(self, row: SecondRow) -> None:
        if len(self.coarse) and row.t <= self.coarse.column("t")[-1]:
            return  # history already holds this second
        self.coarse.append({"t": float(row.t), **row.values})

    def _ensure(self, name: str) -> None:
        if name not in self.raw:
            split_name(name)  # refuse a name outside the scheme early, with a clear message
            self.raw.add_column(name)
            self.coarse.add_column(name)
            self.names.append(name)

    @staticmethod
    def _column(buffer: SeriesBuffer, name: str) -> np.ndarray:
        return buffer.column(name) if name in buffer else np.full(len(buffer), np.nan)


class DashboardModel:
    """Samples of any number of nodes, as named series ready to plot."""

    def __init__(self, *, raw_capacity: int = RAW_CAPACITY, coarse_capacity: int = COARSE_CAPACITY):
        self._raw_capacity = raw_capacity
        self._coarse_capacity = coarse_capacity
        self._series: dict[str, NodeSeries] = {}
        self._workloads: dict[str, tuple[float, float]] = {}  # name -> (ts, tok/s): benchmarks
        self._running: dict[tuple[str, str], tuple[float, float]] = {}  # (node, workload) -> (ts, tok/s)
        self._apart: frozenset[str] = frozenset()
        self.gaps: list[Gap] = []  # the newest MAX_GAPS
        self.gaps_marked = 0  # every gap ever marked, so a view knows which ones it has not drawn
        self.version = 0  # bumps on every new row: a redraw can skip when nothing moved
        self.layout_version = 0  # bumps when a node or a series appears: the view adds curves
        self.latest_ts = -math.inf
        self.earliest_ts = math.inf  # the oldest time held, history included
        self.row_listeners: list[RowListener] = []

    # --- what the view reads ------------------------------------------------

    @property
    def nodes(self) -> list[str]:
        """The real nodes, in the order they were added (the cluster pseudo-node excluded)."""
        return [n for n in self._series if n != CLUSTER]

    def has(self, node: str) -> bool:
        return node in self._series

    def names(self, node: str) -> list[str]:
        return list(self._series[node].names) if node in self._series else []

    def window(self, node: str, name: str, t0: float) -> tuple[np.ndarray, np.ndarray]:
        return self._series[node].window(name, t0)

    def latest(self, node: str, name: str) -> float | None:
        series = self._series.get(node)
        value = series.latest.get(name) if series is not None else None
        return value if value is not None and math.isfinite(value) else None

    def capacity_bytes(self) -> float | None:
        """The cluster's memory capacity: the sum of its live nodes' MemTotal."""
        return self.latest(CLUSTER, MEMORY_TOTAL)

    def used_bytes(self) -> float | None:
        return self.latest(CLUSTER, MEMORY_USED)

    @property
    def apart(self) -> frozenset[str]:
        """The nodes shown beside the cluster, not summed into it."""
        return self._apart

    def set_apart(self, nodes: Iterable[str]) -> None:
        """Show ``nodes`` beside the cluster (their samples stay, its sums leave them out)."""
        apart = frozenset(nodes)
        if apart != self._apart:
            self._apart = apart
            if self.latest_ts > -math.inf:
                self._update_cluster(self.latest_ts + 1e-6, every_time=True)

    # --- feeding ------------------------------------------------------------

    def add_node(self, node: str) -> NodeSeries:
        """Register a node (so it is listed before its first sample); idempotent."""
        series = self._series.get(node)
        if series is None:
            series = self._series[node] = NodeSeries(self._raw_capacity, self._coarse_capacity)
            self.layout_version += 1
        return series

    def add_sample(self, node: str, sample: Sample) -> bool:
        """Add a node's sample; False when it is not newer than the last one (a repeat)."""
        if node == CLUSTER:
            raise ValueError(f"{CLUSTER!r} is the cluster's own name; a node cannot use it")
        series = self.add_node(node)
        if sample.ts <= series.last_t:
            return False
        values = sample_values(sample)
        self._append(node, series, sample.ts, values)
        rates = _workload_rates(sample)
        for workload in [w for n, w in self._running if n == node and w not in rates]:
            del self._running[(node, workload)]  # it ended on this node
        for workload, rate in rates.items():
            self._running[(node, workload)] = (sample.ts, rate)
        if rates:
            self._update_cluster(sample.ts, every_time=True)
        elif MEMORY_USED in values:
            self._update_cluster(sample.ts)
        return True

    def mark_gap(self, node: str, start: float, end: float, reason: str) -> Gap:
        """Note that ``node`` sent nothing from ``start`` to ``end``; its lines break there."""
        gap = Gap(node, start, end, reason)
        self.gaps = [*self.gaps, gap][-MAX_GAPS:]
        self.gaps_marked += 1
        series = self._series.get(node)
        if series is not None and series.last_t < end:
            # A row of nothing between the last sample before and the first after: the line breaks.
            series.raw.append({"t": max(series.last_t, start) + min(1e-3, (end - start) / 2)})
        self.layout_version += 1
        self.version += 1
        return gap

    def add_tokens(self, workload: str, ts: float, tokens_per_s: float) -> None:
        """A workload's tokens/s at ``ts`` (the workloads code calls this); summed into tok.total."""
        self._workloads[workload] = (ts, tokens_per_s)
        self._update_cluster(ts, every_time=True)

    def flush(self) -> None:
        """Finish every second in progress (the app is closing): listeners get the last rows."""
        for node, series in self._series.items():
            row = series.flush()
            if row is not None:
                self._publish(node, row)

    def merge_history(self, histories: Mapping[str, NodeHistory]) -> None:
        """One-second rows from the history store (a reopened app), placed before this session's."""
        for node, history in histories.items():
            if len(history.t):
                self.add_node(node).merge_history(history)
                self.earliest_ts = min(self.earliest_ts, float(history.t[0]))
        self.layout_version += 1
        self.version += 1

    # --- internals -------------------------------------------------------------

    def _append(self, node: str, series: NodeSeries, t: float, values: Mapping[str, float]) -> None:
        before = len(series.names)
        row = series.append(t, values)
        if len(series.names) != before:
            self.layout_version += 1
        self.version += 1
        self.latest_ts = max(self.latest_ts, t)
        self.earliest_ts = min(self.earliest_ts, t)
        if row is not None:
            self._publish(node, row)

    def _publish(self, node: str, row: SecondRow) -> None:
        for listener in self.row_listeners:
            listener(node, row)

    def _update_cluster(self, ts: float, every_time: bool = False) -> None:
        cluster = self.add_node(CLUSTER)
        if ts <= cluster.last_t or (not every_time and ts < cluster.last_t + CLUSTER_STEP_S):
            return  # the next sample brings this one's figures into the sums anyway
        values = self._cluster_values(ts)
        if values:
            self._append(CLUSTER, cluster, ts, values)

    def _cluster_values(self, ts: float) -> dict[str, float]:
        members = [s for n, s in self._series.items() if n != CLUSTER and n not in self._apart]
        fresh = [s.latest for s in members if s.latest_ts >= ts - STALE_S]
        values: dict[str, float] = {}
        for name in (MEMORY_USED, MEMORY_TOTAL):
            figures = [latest[name] for latest in fresh if name in latest]
            if figures:
                values[name] = float(sum(figures))
        tokens = {tokens_series(w): v for w, (t, v) in self._workloads.items() if t >= ts - STALE_S}
        counted = dict(tokens)
        for (node, workload), (t, rate) in self._running.items():
            if t >= ts - STALE_S:
                key = tokens_series(workload)
                tokens[key] = tokens.get(key, 0.0) + rate
                if node not in self._apart:
                    counted[key] = counted.get(key, 0.0) + rate
        if tokens:
            values.update(tokens)  # every workload's curve, this computer's too
            values[TOKENS_TOTAL] = float(sum(counted.values()))  # the cluster's total
        return values


def _workload_rates(sample: Sample) -> dict[str, float]:
    """Each workload's decode tokens/s on the sample's node (its ranks' figures added)."""
    rates: dict[str, float] = {}
    for figure in sample.workloads or ():
        if figure.decode_tps is not None:
            rates[figure.workload_id] = rates.get(figure.workload_id, 0.0) + figure.decode_tps
    return rates
