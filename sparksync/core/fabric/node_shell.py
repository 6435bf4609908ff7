"""Commands and ``~/.ssh`` edits on the nodes, over each node's pinned-key SSH transport.

The mesh and the acceptance check run ordinary tools on the nodes
(``ssh-keygen``, ``ssh``, ``iperf3``, ``ping``, ``ib_write_bw``) as the
paired user. They reach each node the way everything else does: the fleet's
one SSH transport per node (``Fleet.transports``), host key pinned. Tests of
the logic above hand a ``NodeShell`` of their own.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from sparksync.core.ssh.connection import CommandResult, run
from sparksync.core.ssh.remote_keys import edit_ssh_file, read_ssh_file

if TYPE_CHECKING:
    import paramiko

    from sparksync.core.fleet.fleet import Fleet
    from sparksync.core.nodes.registry import Registry
    from sparksync.core.ssh.transports import NodeTransports

__all__ = ["CommandResult", "FleetShell", "NodeShell", "TransportShell", "script"]


class NodeShell(Protocol):
    def run(self, node: str, argv: list[str], timeout: float, stdin: bytes | None = None) -> CommandResult:
        """Run ``argv`` on ``node`` as its paired user; a SparkSyncError when the node cannot be reached."""
        ...

    def edit(self, node: str, relpath: str, change: Callable[[bytes], bytes]) -> bool:
        """Replace ``~/relpath`` with ``change(old)`` under a lock, atomically; True when it changed."""
        ...

    def read(self, node: str, relpath: str) -> bytes:
        """``~/relpath`` (``b""`` when it does not exist)."""
        ...


def script(text: str, *args: str) -> list[str]:
    """``sh -c TEXT sh ARGS...``: a small script whose arguments stay quoted."""
    return ["sh", "-c", text, "sh", *args]


class TransportShell:
    """A ``NodeShell`` over ``NodeTransports`` (by node name)."""

    def __init__(
        self, transports: Callable[[], NodeTransports], registry: Registry, connect_timeout: float = 30.0
    ):
        self._transports = transports
        self.registry = registry
        self.connect_timeout = connect_timeout

    def run(self, node: str, argv: list[str], timeout: float, stdin: bytes | None = None) -> CommandResult:
        return run(self._transport(node), argv, timeout, stdin)

    def edit(self, node: str, relpath: str, change: Callable[[bytes], bytes]) -> bool:
        return edit_ssh_file(self._transport(node), relpath, change, self._where(node))

    def read(self, node: str, relpath: str) -> bytes:
        return read_ssh_file(self._transport(node), relpath)

    def _transport(self, node: str) -> paramiko.Transport:
        return self._transports().get(node, self.connect_timeout)

    def _where(self, node: str) -> str:
        from sparksync.core.nodes.registry import Registry

        entry = Registry(self.registry.path).get(node)
        return f"{entry.user}@{entry.host} ({shlex.quote(node)})"


class FleetShell(TransportShell):
    """The fleet's own transports: one SSH connection per node for everything."""

    def __init__(self, fleet: Fleet, connect_timeout: float = 30.0):
        super().__init__(lambda: fleet.transports, fleet.registry, connect_timeout)
        self.fleet = fleet
