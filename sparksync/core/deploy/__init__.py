"""Deploying the agent to paired nodes: checks, offline bundle, venv, service, health, rollback.

- ``layout``: where everything lives on a node (the contract with tunnels and unpair).
- ``remote``: commands, file reads and uploads over a node's SSH transport, cancellable.
- ``prechecks``: one probe of the node (python3, venv, disk, CPU, what is installed) and its verdicts.
- ``service``: the systemd user unit, or the ``sparksync-agent supervise`` fallback.
- ``health``: the new agent's endpoint and token, a tunnel, and hello with the right version.
- ``node_deploy``: one node, step by step, with rollback to the previous version.
- ``many``: all nodes in parallel, progress callbacks and the summary table.
- ``feed``: deploy progress of every node for the faces to show;
- ``uninstall``: stop the agent and remove every path of the layout (unpair --uninstall).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_exports

if TYPE_CHECKING:
    from sparksync.core.deploy.errors import DeployCancelled, DeployError
    from sparksync.core.deploy.feed import DeployFeed, summary_text
    from sparksync.core.deploy.many import deploy_many, summary_table
    from sparksync.core.deploy.model import DeployOptions, DeployResult, Outcome, ProgressEvent, Stage
    from sparksync.core.deploy.service import MODES
    from sparksync.core.deploy.layout import LAYOUT, RemoteLayout

# name -> the module that holds it
_WHERE = {
    "DeployCancelled": "errors",
    "DeployError": "errors",
    "DeployFeed": "feed",
    "summary_text": "feed",
    "deploy_many": "many",
    "summary_table": "many",
    "DeployOptions": "model",
    "DeployResult": "model",
    "Outcome": "model",
    "ProgressEvent": "model",
    "Stage": "model",
    "MODES": "service",
    "LAYOUT": "layout",
    "RemoteLayout": "layout",
}
__all__ = [
    "DeployCancelled",
    "DeployError",
    "DeployFeed",
    "DeployOptions",
    "DeployResult",
    "LAYOUT",
    "MODES",
    "Outcome",
    "ProgressEvent",
    "RemoteLayout",
    "Stage",
    "deploy_many",
    "summary_table",
    "summary_text",
]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
