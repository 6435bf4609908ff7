"""Example workloads shipped with SparkSync (run on the nodes, not imported by the app)."""
