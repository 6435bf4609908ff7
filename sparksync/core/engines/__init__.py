"""Inference engines SparkSync can build and install on a node (no Qt here)."""
