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
