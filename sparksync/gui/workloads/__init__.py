"""The Workloads tab: launch recipes on node groups, watch their ranks, logs, stop and restart."""
