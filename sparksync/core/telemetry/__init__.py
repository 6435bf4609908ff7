"""Telemetry once it has reached the client: live series, history and summaries.

- ``series`` / ``dashboard_series`` / ``dashboard_model``: what the dashboard plots;
- ``downsample``: one row per second for long windows;
- ``history`` / ``history_recorder``: long-term telemetry in SQLite;
- ``cluster_summary``: the cluster's figures (memory, nodes online, tokens/s);
- ``dashboard_export``: CSV of what is shown.
"""
