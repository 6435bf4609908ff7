"""Telemetry once it has reached the client: live series, history and summaries.

- ``series`` / ``dashboard_series`` / ``dashboard_model``: what the dashboard plots;
- ``downsample``: one row per second for long windows;
- ``history`` / ``history_recorder``: long-term telemetry in SQLite;
- ``cluster_summary``: the cluster's figures (memory, nodes online, tokens/s);
- ``dashboard_export``: CSV of what is shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_exports

if TYPE_CHECKING:
    from sparksync.core.telemetry.cluster_summary import (
        ClusterSummary,
        Health,
        summarize,
    )
    from sparksync.core.telemetry.dashboard_export import (
        export_csv,
        visible_data,
    )
    from sparksync.core.telemetry.dashboard_model import (
        COARSE_SPAN_S,
        DashboardModel,
        NodeHistory,
    )
    from sparksync.core.telemetry.dashboard_series import (
        CLUSTER,
        CLUSTER_LABEL,
        KINDS,
        MEMORY_TOTAL,
        MEMORY_USED,
        TOKENS_TOTAL,
        kind_of,
        plot_of,
        split_name,
    )
    from sparksync.core.telemetry.decimate import (
        peak_decimate,
    )
    from sparksync.core.telemetry.downsample import (
        SecondRow,
    )
    from sparksync.core.telemetry.history import (
        HistoryError,
        HistoryStore,
    )
    from sparksync.core.telemetry.history_recorder import (
        HistoryRecorder,
    )

_WHERE = {
    "ClusterSummary": "cluster_summary",
    "Health": "cluster_summary",
    "summarize": "cluster_summary",
    "export_csv": "dashboard_export",
    "visible_data": "dashboard_export",
    "COARSE_SPAN_S": "dashboard_model",
    "DashboardModel": "dashboard_model",
    "NodeHistory": "dashboard_model",
    "CLUSTER": "dashboard_series",
    "CLUSTER_LABEL": "dashboard_series",
    "KINDS": "dashboard_series",
    "MEMORY_TOTAL": "dashboard_series",
    "MEMORY_USED": "dashboard_series",
    "TOKENS_TOTAL": "dashboard_series",
    "kind_of": "dashboard_series",
    "plot_of": "dashboard_series",
    "split_name": "dashboard_series",
    "peak_decimate": "decimate",
    "SecondRow": "downsample",
    "HistoryError": "history",
    "HistoryStore": "history",
    "HistoryRecorder": "history_recorder",
}
__all__ = [
    "CLUSTER",
    "CLUSTER_LABEL",
    "COARSE_SPAN_S",
    "ClusterSummary",
    "DashboardModel",
    "Health",
    "HistoryError",
    "HistoryRecorder",
    "HistoryStore",
    "KINDS",
    "MEMORY_TOTAL",
    "MEMORY_USED",
    "NodeHistory",
    "SecondRow",
    "TOKENS_TOTAL",
    "export_csv",
    "kind_of",
    "peak_decimate",
    "plot_of",
    "split_name",
    "summarize",
    "visible_data",
]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
