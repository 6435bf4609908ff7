"""The SSH flavour of ``AgentLink``: a paired node's agent, reached through its shared SSH transport.

``SshLink.open()`` reads the agent's token and ``endpoint.json`` over SFTP
(paths from ``deploy.layout.LAYOUT``, relative to the user's home), opens a
``Tunnel`` to the agent's loopback port and gives an ``AgentClient`` on it.
The tunnel and client are reused until the endpoint changes: a restarted
agent listens on a new port, so callers ``open(reread=True)`` after a
failure and get a new tunnel only when the port (or token) really changed.

Every failure comes out as a ``NodeProblem``: offline when SSH cannot reach
the node, degraded when SSH works but the agent does not (not installed,
not running, not answering, another protocol, unreadable or refused token).
The token stays in memory, inside the client's Authorization header.
"""

from __future__ import annotations

import errno
import logging
import threading
from dataclasses import dataclass

import paramiko
from pydantic import ValidationError
from sparksync_agent.state import Endpoint

from sparksync.core.agents.client import AgentClient
from sparksync.core.agents.link import AGENT_TIMEOUT_S, SSH_TIMEOUT_S, AgentLink
from sparksync.core.base.errors import (
    AgentAuthError,
    AgentRequestError,
    AgentUnreachableError,
    ProtocolMismatchError,
    SparkSyncError,
)
from sparksync.core.deploy.layout import LAYOUT, RemoteLayout
from sparksync.core.fleet.problems import NodeProblem, degraded, offline
from sparksync.core.fleet.state import Cause, NodeState
from sparksync.core.ssh.errors import HostKeyChangedError, NodeOfflineError
from sparksync.core.ssh.transports import LinkState, NodeTransports
from sparksync.core.ssh.tunnel import Tunnel

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 64 * 1024  # the token and endpoint.json are tiny; refuse anything odd


@dataclass(frozen=True)
class _Target:
    port: int
    token: str
    run_id: str

    def __repr__(self) -> str:  # never show the token
        return f"_Target(port={self.port}, run_id={self.run_id!r})"


class SshLink(AgentLink):
    """The tunnel and client to one paired node's agent (thread-safe; ``close()`` when done)."""

    kind = "ssh"

    def __init__(
        self,
        name: str,
        transports: NodeTransports,
        *,
        layout: RemoteLayout = LAYOUT,
        ssh_timeout: float = SSH_TIMEOUT_S,
        agent_timeout: float = AGENT_TIMEOUT_S,
        stream_read_timeout: float | None = None,
    ):
        self.name = name
        self.transports = transports
        self.layout = layout
        self.ssh_timeout = ssh_timeout
        self.agent_timeout = agent_timeout
        self.stream_read_timeout = stream_read_timeout
        self._lock = threading.Lock()
        self._target: _Target | None = None
        self._tunnel: Tunnel | None = None
        self._client: AgentClient | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"SshLink({self.name!r}, {self._target!r})"

    # --- opening ----------------------------------------------------------------------------

    def open(self, cancel: threading.Event | None = None, *, reread: bool = False) -> AgentClient:
        """A client for the agent; ``reread``: read the endpoint again first (after a failure)."""
        with self._lock:
            if self._closed:
                raise offline(f"The link to {self.name!r} was closed.")
            if self._client is not None and not reread:
                return self._client
            transport = self._transport(cancel)
            target = self._read_target(transport)
            if self._client is None or target != self._target:
                return self._rebuild(target, cancel)
            return self._client

    def reachable(self) -> bool:
        return self.transports.status(self.name).state is LinkState.UP

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._drop()

    # --- what went wrong ----------------------------------------------------------------------

    def explain(self, exc: BaseException) -> NodeProblem:
        """The node-level meaning of an error met while talking to the agent."""
        if isinstance(exc, NodeProblem):
            return exc
        link = self.transports.status(self.name)
        if link.state is not LinkState.UP:
            return self._offline()
        if isinstance(exc, ProtocolMismatchError):
            return degraded(Cause.INCOMPATIBLE, f"Incompatible agent: {exc}")
        if isinstance(exc, AgentAuthError):
            return degraded(
                Cause.TOKEN_REFUSED,
                f"The agent on {self.name!r} refused the token read from ~/{self.layout.token}. "
                "Restart the agent on the node (redeploy it with `sparksync node deploy`).",
            )
        if isinstance(exc, AgentUnreachableError) or (
            isinstance(exc, AgentRequestError) and exc.status >= 500
        ):
            return self._not_answering()
        return degraded(Cause.AGENT_NOT_ANSWERING, f"The agent on {self.name!r} failed: {exc}")

    def _not_answering(self) -> NodeProblem:
        target = self._target
        port = target.port if target is not None else None
        if port is not None and not self._port_open(port):
            return degraded(
                Cause.AGENT_NOT_RUNNING,
                f"The agent on {self.name!r} is not running (nothing listens on its port {port}; "
                f"~/{self.layout.endpoint} is left from an earlier run). Start it again with "
                "`sparksync node deploy`.",
            )
        return degraded(
            Cause.AGENT_NOT_ANSWERING,
            f"The agent on {self.name!r} does not answer on port {port} within {self.agent_timeout:g} s; "
            "it may be overloaded or hung. Restart it with `sparksync node deploy`.",
        )

    def _port_open(self, port: int) -> bool:
        """Whether something on the node accepts connections on its loopback ``port``."""
        # The SSH wait, not a request's: on a busy node sshd's answer can take longer than the
        # agent is given, and a refused connect comes back at once on a live link anyway. A link
        # that died unnoticed is cut by its keepalive well before this runs out.
        try:
            transport = self.transports.get(self.name, self.ssh_timeout)
            channel = transport.open_channel(
                "direct-tcpip", ("127.0.0.1", port), ("127.0.0.1", 0), timeout=self.ssh_timeout
            )
        except paramiko.ChannelException:
            return False  # the node's sshd could not connect: nobody listens there
        except (SparkSyncError, paramiko.SSHException, OSError, EOFError) as exc:
            log.info("node %s: cannot tell whether port %d is open (%s)", self.name, port, exc)
            return True  # do not claim the agent is down
        channel.close()
        return True

    # --- internals ------------------------------------------------------------------------------

    def _transport(self, cancel: threading.Event | None) -> paramiko.Transport:
        try:
            return self.transports.get(self.name, self.ssh_timeout, cancel)
        except HostKeyChangedError as exc:
            raise NodeProblem(NodeState.OFFLINE, Cause.HOST_KEY_CHANGED, str(exc)) from exc
        except NodeOfflineError:
            raise self._offline() from None

    def _offline(self) -> NodeProblem:
        link = self.transports.status(self.name)
        reason = link.reason or f"not connected within {self.ssh_timeout:g} s"
        if link.state is LinkState.HOST_KEY_CHANGED:
            return NodeProblem(NodeState.OFFLINE, Cause.HOST_KEY_CHANGED, reason)
        return offline(reason)

    def _read_target(self, transport: paramiko.Transport) -> _Target:
        try:
            sftp = self._sftp(transport)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise self.explain(AgentUnreachableError(f"SFTP to {self.name!r} failed ({exc})")) from exc
        try:
            token = self._read(sftp, self.layout.token, Cause.AGENT_NOT_INSTALLED, "no agent token")
            raw = self._read(sftp, self.layout.endpoint, Cause.AGENT_NOT_RUNNING, "the agent is not running")
        finally:
            sftp.close()
        try:
            endpoint = Endpoint.model_validate_json(raw)
        except ValidationError as exc:
            raise degraded(
                Cause.AGENT_NOT_RUNNING,
                f"~/{self.layout.endpoint} on {self.name!r} is unreadable ({exc.errors()[0]['msg']}); "
                "restart the agent with `sparksync node deploy`.",
            ) from exc
        token_text = token.decode(errors="replace").strip()
        if not token_text:
            raise degraded(Cause.TOKEN_UNREADABLE, f"~/{self.layout.token} on {self.name!r} is empty.")
        return _Target(endpoint.port, token_text, endpoint.run_id)

    def _sftp(self, transport: paramiko.Transport) -> paramiko.SFTPClient:
        channel = transport.open_session(timeout=self.ssh_timeout)
        channel.settimeout(self.ssh_timeout)
        channel.invoke_subsystem("sftp")
        return paramiko.SFTPClient(channel)

    def _read(self, sftp: paramiko.SFTPClient, path: str, missing: Cause, what: str) -> bytes:
        try:
            with sftp.open(path, "rb") as handle:
                return handle.read(MAX_FILE_BYTES)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                hint = (
                    "deploy the agent with `sparksync node deploy`"
                    if missing is Cause.AGENT_NOT_INSTALLED
                    else "start it with `sparksync node deploy`"
                )
                raise degraded(
                    missing, f"{what.capitalize()} on {self.name!r} (~/{path} is missing); {hint}."
                ) from exc
            if exc.errno == errno.EACCES:
                raise degraded(
                    Cause.TOKEN_UNREADABLE,
                    f"~/{path} on {self.name!r} cannot be read by the SSH user (permission denied); "
                    "the agent must run as the user SparkSync logs in as.",
                ) from exc
            raise self.explain(AgentUnreachableError(f"reading ~/{path} failed ({exc})")) from exc
        except (paramiko.SSHException, EOFError) as exc:
            raise self.explain(AgentUnreachableError(f"reading ~/{path} failed ({exc})")) from exc

    def _rebuild(self, target: _Target, cancel: threading.Event | None) -> AgentClient:
        if self._target is not None:
            log.info(
                "node %s: the agent's endpoint changed (run %s -> %s)",
                self.name,
                self._target.run_id,
                target.run_id,
            )
        self._drop()
        transports, name, timeout = self.transports, self.name, self.ssh_timeout
        self._tunnel = Tunnel(
            lambda stop: transports.get(name, timeout, stop), "127.0.0.1", target.port, label=name
        )
        url = f"http://127.0.0.1:{self._tunnel.local_port}"
        if self.stream_read_timeout is None:
            client = AgentClient(url, target.token, self.agent_timeout, label=name)
        else:
            client = AgentClient(url, target.token, self.agent_timeout, stream_read_timeout=self.stream_read_timeout,
                                 label=name)  # fmt: skip
        self._client, self._target = client, target
        return client

    def _drop(self) -> None:
        client, tunnel = self._client, self._tunnel
        self._client = self._tunnel = self._target = None
        if client is not None:
            client.close()
        if tunnel is not None:
            tunnel.close()
