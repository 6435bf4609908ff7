"""The telemetry summary of a benchmark: peak memory, mean fabric traffic and energy during the run.

It is read from the client's telemetry history (``sparksync.core.telemetry.history``):
one row per node per second, the mean of that second's samples, written by
whichever SparkSync process shows the nodes' live telemetry (the app's
dashboard). Rows of the run's window ``[start, end]`` are summarised:

* peak memory: the highest ``mem.used`` of any node in any second;
* mean link bandwidth: per node and second, the fabric's received plus sent
  bytes (RDMA ports, whose traffic bypasses the IP counters, and the CX-7
  interfaces' IP traffic), averaged over the nodes and the seconds;
* energy: the NVML power draw of every GPU, each one-second row counting
  for one second, summed over the nodes. None when no GPU reports power.

When nothing recorded telemetry during the run (no app open, a CLI-only
machine) there is no summary, and the history stores none.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Collection, Mapping
from pathlib import Path

import numpy as np

from sparksync.core.telemetry import history as telemetry_history
from sparksync.core.bench.record import RunRecord
from sparksync.core.bench.telemetry import TelemetrySummary
from sparksync.core.telemetry.dashboard_model import NodeHistory
from sparksync.core.telemetry.dashboard_series import CLUSTER, MEMORY_USED
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.nodes.identity import NodeNames
from sparksync.core.telemetry.history_recorder import FLUSH_EVERY_S

log = logging.getLogger(__name__)

# ConnectX-7 ports are named by PCI path plus the physical port (enp1s0f0np0, enP2p1s0f1np1): the
# agent classifies them as fabric by the same rule.
FABRIC_INTERFACE = re.compile(r"^en\w*np\d+$")
# The recorder writes every FLUSH_EVERY_S; wait a little longer for the run's last seconds.
SETTLE_S = 2 * FLUSH_EVERY_S + 1.0
_POLL_S = 0.25
LIVE_LOOKBACK_S = 30.0


def summarize(histories: Mapping[str, NodeHistory], start: float, end: float,
              nodes: Collection[str] = ()) -> TelemetrySummary | None:
    """The summary of the rows in ``[start, end]`` (Unix seconds) of ``nodes`` (all real nodes when empty)."""
    window = _window(histories, start, end, nodes)
    if not window:
        return None
    memory = [np.nanmax(h.values[MEMORY_USED]) for h in window.values() if _has(h, MEMORY_USED)]
    links = [v for h in window.values() if (v := _fabric_bytes_per_s(h)) is not None]
    energy = [v for h in window.values() if (v := _energy_joules(h)) is not None]
    seconds = {int(t) for h in window.values() for t in h.t}
    return TelemetrySummary(
        peak_memory_bytes=int(max(memory)) if memory else None,
        mean_link_bytes_per_s=float(np.mean(links)) if links else None,
        energy_joules=float(sum(energy)) if energy else None,
        sample_count=sum(len(h.t) for h in window.values()),
        nodes=tuple(sorted(window)),
        seconds=len(seconds),
    )


def with_run_telemetry(record: RunRecord, settle_s: float = SETTLE_S) -> RunRecord:
    """``record`` with the telemetry recorded during its run, when any was (``details.duration_s`` long)."""
    start = record.created_at.timestamp()
    end = start + (record.details.duration_s or 0.0)
    summary = summary_from_store(start, end, record.context.nodes, settle_s=settle_s)
    if summary is None:
        return record
    return record.model_copy(update={"context": record.context.model_copy(update={"telemetry": summary})})


def summary_from_store(start: float, end: float, nodes: Collection[str] = (), path: Path | None = None,
                       settle_s: float = SETTLE_S) -> TelemetrySummary | None:
    """``summarize`` over the telemetry history file; None when there is none or it has no rows then.

    A live recorder writes every few seconds, so when the window's first rows
    are there but its last are not yet, this waits up to ``settle_s`` for them.
    """
    path = path or telemetry_history.default_path()
    if not path.is_file():
        return None  # never create the app's history from here
    try:
        with telemetry_history.HistoryStore(path) as store:
            histories = _load_settled(store, NodeNames.current(), start, end, nodes, settle_s)
    except SparkSyncError as exc:
        log.warning("benchmark telemetry summary skipped: %s", exc)
        return None
    return summarize(histories, start, end, nodes)


def _load_settled(store: telemetry_history.HistoryStore, names: NodeNames, start: float, end: float,
                  nodes: Collection[str], settle_s: float) -> Mapping[str, NodeHistory]:
    deadline = time.monotonic() + settle_s
    while True:
        # By name: the run names its nodes as they were called when it ran, which is their name now.
        histories = store.load_named(time.time() - math.floor(start) + LIVE_LOOKBACK_S, names)
        # Rows shortly before the run mean a recorder is live: its last seconds are still to come.
        recent = _window(histories, start - LIVE_LOOKBACK_S, time.time(), nodes)
        newest = max((h.t[-1] for h in recent.values()), default=None)
        if newest is None or newest >= math.floor(end) - 1 or time.monotonic() >= deadline:
            return histories
        time.sleep(_POLL_S)


def _window(histories: Mapping[str, NodeHistory], start: float, end: float,
            nodes: Collection[str]) -> dict[str, NodeHistory]:
    chosen = {}
    for name, history in histories.items():
        if name == CLUSTER or (nodes and name not in nodes):
            continue
        keep = (history.t >= math.floor(start)) & (history.t <= end)
        if keep.any():
            chosen[name] = NodeHistory(history.t[keep], {k: v[keep] for k, v in history.values.items()})
    return chosen


def _has(history: NodeHistory, name: str) -> bool:
    values = history.values.get(name)
    return values is not None and bool(np.isfinite(values).any())


def _fabric_bytes_per_s(history: NodeHistory) -> float | None:
    """Mean over the node's seconds of its fabric traffic, both directions, in bytes/s."""
    series = [v for name, v in history.values.items() if _is_fabric(name)]
    if not series:
        return None
    per_second = np.nansum(np.vstack(series), axis=0) / 8  # the series are in bits/s
    return float(np.mean(per_second))


def _is_fabric(name: str) -> bool:
    if name.startswith(("rdma.rx.", "rdma.tx.")):
        return True
    if name.startswith(("net.rx.", "net.tx.")):
        return bool(FABRIC_INTERFACE.match(name[len("net.rx."):]))
    return False


def _energy_joules(history: NodeHistory) -> float | None:
    """Each one-second row's mean power counts for one second; all GPUs of the node together."""
    series = [v for name, v in history.values.items() if name.startswith("gpu.power.")]
    if not series or not any(np.isfinite(v).any() for v in series):
        return None
    return float(np.nansum(np.vstack(series)))
