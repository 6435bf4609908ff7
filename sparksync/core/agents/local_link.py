"""The local flavour of ``AgentLink``: this computer, through the agent the client runs on loopback.

"This computer" is a node like any other: workloads, benchmarks, Switchyard
pools and telemetry reach it through this link, with no SSH. Its agent is a
``LocalAgent``: attached to when one already runs for the state directory
(the app's, say, while a command runs), else started here and stopped by
``close()``. The port and token come from the state directory's
``endpoint.json`` and token file (mode 0600); finding the agent again
(``reread``) starts a new one when the old one has died.

On the command line this computer is ``local`` or its name, ``this computer``.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from sparksync_agent.state import pid_alive

from sparksync.core.agents.client import AgentClient
from sparksync.core.agents.link import AGENT_TIMEOUT_S, AgentLink
from sparksync.core.agents.local import LocalAgent, read_endpoint
from sparksync.core.agents.this_computer import LOCAL_NODE_NAME
from sparksync.core.base.errors import (
    AgentAuthError,
    AgentRequestError,
    AgentUnreachableError,
    LocalAgentCancelled,
    LocalAgentError,
    ProtocolMismatchError,
)
from sparksync.core.fleet.problems import NodeProblem, degraded
from sparksync.core.fleet.state import Cause

log = logging.getLogger(__name__)

DYING_S = 0.5  # after a failed request: how long a dying agent we started may take to be seen gone

class LocalLink(AgentLink):
    """This computer's agent: attached to, or started on first use and stopped by ``close()``."""

    kind = "local"

    def __init__(
        self,
        state_dir: Path | None = None,
        sample_hz: float = 1.0,
        *,
        agent_timeout: float = AGENT_TIMEOUT_S,
    ):
        self.name = LOCAL_NODE_NAME
        self.state_dir = state_dir
        self.sample_hz = sample_hz
        self.agent_timeout = agent_timeout
        self._lock = threading.Lock()
        self._closing = threading.Event()  # wakes a start in progress when the link closes
        self._agent: LocalAgent | None = None
        self._client: AgentClient | None = None
        self._pid: int | None = None  # the agent process the client talks to

    def __repr__(self) -> str:
        return f"LocalLink({self._agent!r})"

    @property
    def agent(self) -> LocalAgent | None:
        """The local agent this link uses (None until first opened)."""
        return self._agent

    def open(self, cancel: threading.Event | None = None, *, reread: bool = False) -> AgentClient:
        with self._lock:
            if self._closing.is_set():
                raise degraded(Cause.AGENT_NOT_RUNNING, "The link to this computer's agent was closed.")
            if self._client is not None and not (reread and self._moved(DYING_S)):
                return self._client
            self._drop()
            agent = LocalAgent(self.state_dir, self.sample_hz)
            agent.start(cancel or self._closing)  # attaches to a running agent, or starts one
            self._agent, self._pid = agent, agent.pid
            self._client = agent.client(timeout=self.agent_timeout)
            return self._client

    def reachable(self) -> bool:
        return True  # this computer is always there; only its agent can be missing

    def explain(self, exc: BaseException) -> NodeProblem:
        if isinstance(exc, NodeProblem):
            return exc
        if isinstance(exc, LocalAgentCancelled):
            return degraded(Cause.AGENT_NOT_RUNNING, "Starting this computer's agent was cancelled.")
        if isinstance(exc, LocalAgentError):
            return degraded(Cause.AGENT_NOT_RUNNING, str(exc))
        if isinstance(exc, ProtocolMismatchError):
            return degraded(Cause.INCOMPATIBLE, f"Incompatible local agent: {exc}")
        if isinstance(exc, AgentAuthError):
            return degraded(
                Cause.TOKEN_REFUSED,
                "This computer's agent refused the token in its own state directory. "
                "Quit SparkSync (which stops the agent it started) and open it again.",
            )
        if isinstance(exc, AgentUnreachableError) or (isinstance(exc, AgentRequestError) and exc.status >= 500):
            if self._moved(DYING_S):
                return degraded(
                    Cause.AGENT_NOT_RUNNING, f"This computer's agent stopped ({exc}); SparkSync starts it again."
                )
            return degraded(Cause.AGENT_NOT_ANSWERING, f"This computer's agent does not answer: {exc}")
        return degraded(Cause.AGENT_NOT_ANSWERING, f"This computer's agent failed: {exc}")

    def close(self) -> None:
        self._closing.set()
        with self._lock:
            self._drop()

    # --- internals ----------------------------------------------------------------------------

    def _moved(self, within: float = 0.0) -> bool:
        """Whether the agent the client talks to is gone (died, or replaced by another one).

        ``within``: how long to wait for an agent we started to finish dying: its
        socket closes a moment before its exit can be seen.
        """
        if self._agent is None:
            return True
        if self._agent.owned:
            return not self._agent.is_alive() or self._agent.exited(within)
        live = read_endpoint(self._agent.state_dir)
        return live is None or live.pid != self._pid or not pid_alive(live.pid)

    def _drop(self) -> None:
        client, agent = self._client, self._agent
        self._client = self._agent = None
        self._pid = None
        if client is not None:
            client.close()
        if agent is not None:
            agent.stop()  # a no-op when the agent was only attached to
