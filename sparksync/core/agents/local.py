"""The embedded default: an agent for "this computer", run by the client.

``LocalAgent`` starts ``python -m sparksync_agent serve`` on a free loopback
port as a child process in its own process group (so a Ctrl-C in the
terminal does not hit it, and stop() can signal the whole group), or attaches
to one that already runs for the same state directory. It only ever stops an
agent it started itself.

The agent it starts has this computer's engine folders on its PATH (the
llama.cpp builds in the engine cache, ``engines.llamacpp_build.bin_dirs``),
so a recipe names ``llama-server`` as it would on a node.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from sparksync.core.base import paths
from sparksync.core.agents.client import AgentClient
from sparksync.core.agents.this_computer import LOCAL_NODE_NAME
from sparksync.core.base.errors import (
    AgentUnreachableError,
    LocalAgentCancelled,
    LocalAgentError,
)
from sparksync_agent import state
from sparksync_agent.state import Endpoint

log = logging.getLogger(__name__)

LOG_NAME = "local-agent.log"
START_TIMEOUT_S = 20.0
STOP_GRACE_S = 3.0
POLL_S = 0.05
LOG_TAIL_LINES = 15


class LocalAgent:
    """Runs (or attaches to) the local agent for ``state_dir``."""

    def __init__(
        self,
        state_dir: Path | None = None,
        sample_hz: float = 1.0,
        *,
        log_path: Path | None = None,
        start_timeout: float = START_TIMEOUT_S,
    ):
        self.state_dir = Path(state_dir) if state_dir is not None else paths.local_agent_state_dir()
        self.sample_hz = sample_hz
        self.log_path = log_path or paths.log_dir() / LOG_NAME
        self.start_timeout = start_timeout
        self._proc: subprocess.Popen | None = None
        self._endpoint: Endpoint | None = None
        self._token: str | None = None
        self._log_offset = 0

    def __repr__(self) -> str:
        return f"LocalAgent({str(self.state_dir)!r}, owned={self.owned}, endpoint={self._endpoint})"

    # --- what callers read -------------------------------------------------

    @property
    def owned(self) -> bool:
        """True when this object started the agent (and so will stop it)."""
        return self._proc is not None

    @property
    def endpoint(self) -> Endpoint:
        if self._endpoint is None:
            raise LocalAgentError("the local agent is not started. Call start() first.")
        return self._endpoint

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.endpoint.port}"

    @property
    def pid(self) -> int:
        return self.endpoint.pid

    @property
    def returncode(self) -> int | None:
        """Exit code of the agent we started, None while it runs or if we only attached."""
        return self._proc.poll() if self._proc is not None else None

    def is_alive(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        live = read_endpoint(self.state_dir)
        return self._endpoint is not None and live is not None and live.pid == self._endpoint.pid

    def exited(self, within: float) -> bool:
        """Whether the agent we started has exited (waiting up to ``within`` s for it to finish dying)."""
        if self._proc is None:
            return False
        try:
            self._proc.wait(timeout=within)
        except subprocess.TimeoutExpired:
            return False
        return True

    def client(self, timeout: float = 5.0) -> AgentClient:
        """A client for this agent; the caller closes it."""
        return AgentClient(self.base_url, self._require_token(), timeout=timeout, label=LOCAL_NODE_NAME)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines the agent we started wrote to its log."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(self._log_offset)
                text = fh.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # --- lifecycle ---------------------------------------------------------

    def start(self, cancel: threading.Event | None = None) -> LocalAgent:
        """Attach to a running agent for ``state_dir``, or start one and wait until it answers.

        ``cancel`` lets another thread abandon the wait; the half-started
        agent is stopped and LocalAgentCancelled raised.
        """
        if self._endpoint is not None:
            return self
        if self._try_attach():
            return self
        self._spawn()
        try:
            self._wait_ready(cancel or threading.Event())
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the agent if we started it: SIGTERM, then SIGKILL after a grace period."""
        proc, self._proc = self._proc, None
        self._endpoint = None
        if proc is None:
            return
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                log.warning("local agent pid %d ignored SIGTERM for %.0f s; killing it", proc.pid, STOP_GRACE_S)
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
        log.info("local agent pid %d stopped (exit code %s)", proc.pid, proc.returncode)

    def __enter__(self) -> LocalAgent:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # --- internals ---------------------------------------------------------

    def _try_attach(self) -> bool:
        endpoint = read_endpoint(self.state_dir)
        if endpoint is None or read_token(self.state_dir) is None:
            return False
        self._endpoint = endpoint
        if not self._answers():
            # A stale endpoint.json whose pid was reused by another program.
            self._endpoint = None
            return False
        log.info("attached to the local agent pid %d on port %d", endpoint.pid, endpoint.port)
        return True

    def _spawn(self) -> None:
        paths.ensure_dir(self.log_path.parent)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        cmd = [
            sys.executable, "-m", "sparksync_agent", "serve",
            "--port", "0",
            "--state-dir", str(self.state_dir),
            "--no-advertise",
            "--sample-hz", f"{self.sample_hz:g}",
            # The agent we start must not outlive us, even if this process crashes.
            "--parent-pid", str(os.getpid()),
        ]  # fmt: skip
        with open(self.log_path, "ab") as log_file:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file, start_new_session=True,
                env=agent_environment(),
            )  # fmt: skip
        log.info("started the local agent pid %d (state %s, log %s)", self._proc.pid, self.state_dir, self.log_path)

    def _wait_ready(self, cancel: threading.Event) -> None:
        proc = self._proc
        assert proc is not None
        deadline = time.monotonic() + self.start_timeout
        while not self._ready(proc):
            if proc.poll() is not None:
                error = self._died(proc)
                self._proc = None
                if self._try_attach():  # another client won the race to start it
                    return
                raise error
            if time.monotonic() > deadline:
                raise LocalAgentError(
                    f"the local agent did not answer within {self.start_timeout:.0f} s. "
                    f"See its log {self.log_path}; its last lines:\n{self._indented_tail()}"
                )
            if cancel.wait(POLL_S):
                raise LocalAgentCancelled("starting the local agent was cancelled.")

    def _ready(self, proc: subprocess.Popen) -> bool:
        endpoint = read_endpoint(self.state_dir)
        if endpoint is None or endpoint.pid != proc.pid or read_token(self.state_dir) is None:
            return False
        self._endpoint = endpoint
        if self._answers():
            return True
        self._endpoint = None
        return False

    def _answers(self) -> bool:
        try:
            with self.client(timeout=2.0) as client:
                client.hello()
        except AgentUnreachableError:
            return False
        return True

    def _died(self, proc: subprocess.Popen) -> LocalAgentError:
        code = proc.returncode
        return LocalAgentError(
            f"the local agent exited with code {code} before it was ready. "
            f"See its log {self.log_path}; its last lines:\n{self._indented_tail()}"
        )

    def _indented_tail(self) -> str:
        tail = self.log_tail()
        return "\n".join("    " + line for line in tail.splitlines()) if tail else "    (the log is empty)"

    def _require_token(self) -> str:
        token = read_token(self.state_dir)
        if token is None:
            raise LocalAgentError(
                f"the local agent's token file is missing from {self.state_dir}. "
                "Stop the local agent and start SparkSync again so it makes a new one."
            )
        return token


def agent_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The local agent's environment: ours, with this computer's engine folders added to PATH."""
    from sparksync.core.engines.llamacpp_build import bin_dirs

    env = dict(os.environ if environ is None else environ)
    path = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p]
    env["PATH"] = os.pathsep.join([*path, *(str(d) for d in bin_dirs() if str(d) not in path)])
    return env


def read_endpoint(state_dir: Path) -> Endpoint | None:
    try:
        return state.read_endpoint(state_dir)
    except OSError:  # e.g. a file where the state dir should be: the agent itself will say so
        return None


def read_token(state_dir: Path) -> str | None:
    try:
        return state.read_token(state_dir)
    except OSError:
        return None


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)  # start_new_session made the agent its group's leader
    except ProcessLookupError:
        pass
