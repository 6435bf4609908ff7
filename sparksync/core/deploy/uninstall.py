"""Removing the agent from a node: stop it however it runs, then remove every path of the layout.

Used by ``sparksync node unpair --uninstall`` before our key leaves the node.
An agent found through its endpoint file but run by neither the service nor
the supervisor (started by hand, say) is stopped too, but only when that pid
really is a ``sparksync-agent serve`` of this user.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import paramiko

from sparksync.core.deploy import service
from sparksync.core.deploy.errors import UninstallError
from sparksync.core.deploy.health import read_endpoint
from sparksync.core.deploy.layout import LAYOUT
from sparksync.core.deploy.remote import RemoteNode, failure_text

log = logging.getLogger(__name__)

_STOP_AGENT = r"""
pid="$1"
tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q 'sparksync.agent.* serve' || exit 0
kill -TERM "$pid" 2>/dev/null
i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
echo "stopped agent $pid"
"""

_REMOVE = r"""
rm -rf "$1" "$2" "$3" || exit 1
if command -v systemctl >/dev/null 2>&1 && timeout 5 systemctl --user show-environment >/dev/null 2>&1; then
  systemctl --user daemon-reload 2>/dev/null
fi
for p in "$1" "$2" "$3"; do [ -e "$p" ] || [ -L "$p" ] && echo "left: $p"; done
exit 0
"""


@dataclass
class UninstallReport:
    stopped: list[str] = field(default_factory=list)  # what was running and is stopped now
    removed: list[str] = field(default_factory=list)  # layout paths, relative to the home

    @property
    def summary(self) -> str:
        parts = self.stopped or ["no agent was running"]
        return "; ".join(parts) + f"; removed ~/{', ~/'.join(self.removed)}"


def uninstall_agent(transport: paramiko.Transport, node: str) -> UninstallReport:
    """Stop the agent on ``node`` and remove its files; UninstallError says what is left."""
    with RemoteNode(transport, node) as remote:
        report = UninstallReport()
        endpoint = read_endpoint(remote)
        if service.stop_systemd(remote, quiet=True, disable=True):
            report.stopped.append("systemd user service stopped and disabled")
        stopped = service.stop_supervisor(remote)
        if stopped:
            report.stopped.append(f"supervisor {stopped.split()[-1]} stopped")
        if endpoint is not None:
            line = remote.sh(_STOP_AGENT, str(endpoint.pid)).stdout.decode(errors="replace").strip()
            if line:
                report.stopped.append(line)
        paths = [LAYOUT.root, LAYOUT.state_dir, LAYOUT.unit_file]
        result = remote.sh(_REMOVE, *paths, timeout=120)
        left = [line.removeprefix("left: ") for line in result.stdout.decode(errors="replace").splitlines()]
        if result.exit_status != 0 or left:
            raise UninstallError(
                f"the agent's files could not all be removed from {node} ({failure_text(result)}; left: "
                f"{', '.join(left) or 'unknown'}); remove them by hand: rm -rf {' '.join('~/' + p for p in paths)}"
            )
        report.removed = paths
        log.info("uninstalled the agent from %s: %s", node, report.summary)
        return report
