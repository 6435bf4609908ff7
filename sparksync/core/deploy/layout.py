"""Where the agent lives on a node: the contract between deploy, tunnels and unpair.

Every path is relative to the SSH user's home, so one layout serves any user
and never needs root. Deploy writes these paths; the tunnel code reads the
token and the endpoint from them; unpair --uninstall removes them.

    ~/.local/share/sparksync-agent/
        versions/<version>/venv/      one venv per installed agent version
        current -> versions/<version> the version that runs (switched atomically)
        previous -> versions/<version> the one to roll back to
        bundles/<bundle file>         uploaded bundles, kept for re-installs
        versions/<version>/installed.json  written last: the version's venv is complete
        bundles/.unpacked-<version>/  a bundle unpacked for installing, removed afterwards
        supervise.pid                 the fallback supervisor's pid (no user systemd)
        supervise.json                the supervisor's child pid, starts and last exit
        agent.log                     the fallback supervisor's log
    ~/.local/state/sparksync-agent/   the agent's --state-dir: token (0600), endpoint.json, node_id
    ~/.config/systemd/user/sparksync-agent.service
"""

from __future__ import annotations

from dataclasses import dataclass

SERVICE_NAME = "sparksync-agent.service"


@dataclass(frozen=True)
class RemoteLayout:
    """Paths on a node, as strings relative to the user's home (no leading '/')."""

    root: str = ".local/share/sparksync-agent"
    state_dir: str = ".local/state/sparksync-agent"
    unit_dir: str = ".config/systemd/user"

    @property
    def versions(self) -> str:
        return f"{self.root}/versions"

    def version_dir(self, version: str) -> str:
        return f"{self.versions}/{version}"

    def venv(self, version: str) -> str:
        return f"{self.version_dir(version)}/venv"

    def installed_marker(self, version: str) -> str:
        """Written once the version's venv is complete; a version dir without it is a leftover."""
        return f"{self.version_dir(version)}/installed.json"

    def unpacked_bundle(self, version: str) -> str:
        return f"{self.bundles}/.unpacked-{version}"

    @property
    def current(self) -> str:
        return f"{self.root}/current"

    @property
    def previous(self) -> str:
        return f"{self.root}/previous"

    @property
    def current_agent(self) -> str:
        """The agent executable of the running version, through the ``current`` link."""
        return f"{self.current}/venv/bin/sparksync-agent"

    @property
    def bundles(self) -> str:
        return f"{self.root}/bundles"

    @property
    def supervise_pid(self) -> str:
        return f"{self.root}/supervise.pid"

    @property
    def supervise_state(self) -> str:
        return f"{self.root}/supervise.json"

    @property
    def log_file(self) -> str:
        return f"{self.root}/agent.log"

    @property
    def token(self) -> str:
        return f"{self.state_dir}/token"

    @property
    def endpoint(self) -> str:
        return f"{self.state_dir}/endpoint.json"

    @property
    def node_id(self) -> str:
        """The agent's node id: read at pairing, written by deploy (the node's id in the registry)."""
        return f"{self.state_dir}/node_id"

    @property
    def unit_file(self) -> str:
        return f"{self.unit_dir}/{SERVICE_NAME}"


LAYOUT = RemoteLayout()
