"""Where the root helper keeps a node's fabric state, and how this node applies a plan.

``/var/lib/sparksync-fabric/<node id>/`` (root-owned, readable by all: it
holds addresses, never a secret):

- ``previous.json``: the fabric netdevs as they were before SparkSync's
  first apply (addresses, MTU, up/down) and the netplan file it replaced,
  if any. Kept across re-applies, so a rollback always returns to the state
  before SparkSync; removed by a rollback.
- ``applied.json``: the plan id the node carries now.

Keyed by node id so that two agents on one filesystem (a lab of namespaces)
never share it.

The applier is ``netplan`` where netplan runs the network (DGX OS: the
``netplan`` command, ``/etc/netplan`` and systemd as init), else ``iproute2``.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

STATE_ROOT = Path("/var/lib/sparksync-fabric")
NETPLAN_FILE = Path("/etc/netplan/40-sparksync-fabric.yaml")
_NODE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def state_dir(node_id: str, root: Path = STATE_ROOT) -> Path:
    if not _NODE_ID.match(node_id):
        raise ValueError(f"not a node id: {node_id!r}")
    return root / node_id


def applier() -> str:
    if shutil.which("netplan") and Path("/etc/netplan").is_dir() and Path("/run/systemd/system").is_dir():
        return "netplan"
    return "iproute2"


def applied_plan_id(node_id: str, root: Path = STATE_ROOT) -> str | None:
    try:
        return str(json.loads((state_dir(node_id, root) / "applied.json").read_text())["plan_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
