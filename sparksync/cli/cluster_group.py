"""``sparksync cluster ...``: the fabric's commands and the node-to-node SSH mesh and check."""

from __future__ import annotations

from sparksync.cli.cluster import cluster
from sparksync.cli.cluster_mesh import add_mesh_commands

add_mesh_commands(cluster)

__all__ = ["cluster"]
