"""A real agent with its supervisor, and a sweep that leaves no rank running after a test."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from sparksync.core.agents.client import AgentClient
from tests.agent.agentproc import RunningAgent, start_agent

WAIT_S = 60.0  # generous: the machine is shared and loaded
SPARE_NAME = "sparksync-spare"  # the agent's spare keeper, as `ps` names it


class SupervisedAgent:
    """One state directory, and the agent (restartable) serving it."""

    def __init__(self, state_dir: Path, log_dir: Path):
        self.state_dir, self.log_dir = state_dir, log_dir
        self.agent: RunningAgent | None = None
        self.client: AgentClient | None = None
        self.starts = 0

    def start(self) -> AgentClient:
        """Start the agent and wait for its spare keeper: ranks in these tests take the forked path."""
        self.starts += 1
        self.agent = start_agent(self.state_dir, self.log_dir / f"agent{self.starts}.log", "--sample-hz", "2")
        self.client = AgentClient(self.agent.base_url, self.agent.token, timeout=30.0)
        self.spare()
        return self.client

    def spare(self) -> psutil.Process:
        """The agent's spare keeper, once its imports are done (it takes its name then)."""

        def found():
            agent = psutil.Process(self.agent.proc.pid)
            return next((p for p in agent.children() if p.name() == SPARE_NAME), None)

        return wait_until(found, "the agent's spare keeper to be ready")

    def stop(self) -> None:
        """Stop the agent only (SIGTERM); its ranks keep running."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.agent is not None:
            self.agent.stop(timeout=15.0)

    def keeper_pids(self) -> list[int]:
        """Keepers of ranks recorded in the state directory and still running.

        A keeper leads its own session; the agent's spare keeper (same command line) does not.
        """
        pids = []
        for proc in psutil.process_iter(["cmdline"]):
            cmd = proc.info["cmdline"] or []
            if "sparksync_agent.supervisor.keeper" in cmd and any(str(self.state_dir) in a for a in cmd):
                with contextlib.suppress(ProcessLookupError):
                    if os.getsid(proc.pid) == proc.pid:
                        pids.append(proc.pid)
        return pids

    def sweep(self) -> list[int]:
        """Kill whatever ranks a failed test left behind; returns the keepers found."""
        found = self.keeper_pids()
        for pid in found:
            try:
                tree = psutil.Process(pid).children(recursive=True)
                os.killpg(pid, signal.SIGKILL)
                for child in tree:
                    child.kill()
            except (psutil.Error, ProcessLookupError):
                pass
        return found


@pytest.fixture
def supervised(tmp_path) -> SupervisedAgent:
    sa = SupervisedAgent(tmp_path / "state", tmp_path)
    sa.start()
    yield sa
    try:
        if sa.client is not None:
            for workload in sa.client.workloads().workloads:
                sa.client.stop_workload(workload.workload_id, grace_s=3.0)
    finally:
        sa.stop()
        leftovers = sa.sweep()
    assert not leftovers, f"ranks were still running after the test: keepers {leftovers}"


def wait_until(check: Callable[[], object], what: str, timeout: float = WAIT_S, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def python_rank(script: str, *, role: str = "py", group: str = "g", **launch) -> dict:
    """A RankLaunch body running ``script`` with this interpreter (unbuffered, so lines arrive at once)."""
    body = {
        "group": group, "node": "local", "rank": 0, "role": role,
        "argv": [sys.executable, "-u", "-c", script],
        "readiness": {"kind": "process"}, "log_name": f"{group}.0.{role}.log",
    }  # fmt: skip
    body.update(launch)
    return body


def pid_gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
