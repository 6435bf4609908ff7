"""Real agents on lab nodes, started over SSH as each node's test user, in the deploy layout.

Until a test deploys the agent itself, ``LabAgents.start`` runs it the way a
deployed one runs: as the SSH user, from a Python that user can execute,
with ``--state-dir ~/.local/state/sparksync-agent`` (``LAYOUT.state_dir``),
so the client reads its token and endpoint exactly where deploy puts them,
and with the node's id from the registry in that state dir, as deploy
writes it.

The test venv's Python lives under root's home (mode 700), which a test user
cannot run; ``agent_python`` makes a tiny venv from the system Python (3.11,
the same minor version) whose .pth adds this checkout's site-packages, and
puts it in a world-readable temp dir.

``stop_all`` kills every agent started (by pid), also when a test failed.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
from sparksync_agent.state import Endpoint as AgentEndpoint

from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.deploy.layout import LAYOUT
from sparksync.core.nodes.registry import Registry
from sparksync.core.ssh.connection import Endpoint, SshSettings, connect_with_key, run

from .netlab import LabNode
from .sshd import SshLab

SYSTEM_PYTHON = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
START_TIMEOUT_S = 60.0
SSH = SshSettings(connect_timeout_s=5, handshake_timeout_s=10, auth_timeout_s=15, command_timeout_s=30)


def make_agent_python(parent: Path | None = None) -> tuple[Path, Path]:
    """(python any user can run that imports this checkout's agent, the dir to remove after)."""
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        raise RuntimeError(f"{SYSTEM_PYTHON} is missing; lab agents need the system Python of this version")
    root = Path(tempfile.mkdtemp(prefix="sparksync-lab-agent-", dir=parent))
    root.chmod(0o755)
    venv = root / "venv"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = Path(sysconfig.get_paths()["purelib"])  # this venv's site-packages (editable installs in it)
    target = next((venv / "lib").glob("python3*/site-packages"))
    (target / "sparksync-lab.pth").write_text(f"import site; site.addsitedir({str(site)!r})\n")
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
    return venv / "bin" / "python", root


class LabAgents:
    """Agents started on lab nodes; ``stop_all()`` at teardown."""

    def __init__(self, ssh_lab: SshLab, client_key: ClientKey, python: Path):
        self.ssh_lab = ssh_lab
        self.client_key = client_key
        self.python = python
        self.pids: dict[str, list[int]] = {}

    def home(self, node: LabNode) -> Path:
        return self.ssh_lab.service.home(node)

    def endpoint(self, node: LabNode) -> AgentEndpoint | None:
        try:
            return AgentEndpoint.model_validate_json((self.home(node) / LAYOUT.endpoint).read_bytes())
        except (OSError, ValueError):
            return None

    def token(self, node: LabNode) -> str:
        return (self.home(node) / LAYOUT.token).read_text().strip()

    def start(self, node: LabNode, name: str, sample_hz: float = 2.0, advertise: bool = False) -> AgentEndpoint:
        """Start the agent on ``node`` (paired as ``name``) over SSH; returns its endpoint once published.

        ``advertise``: it announces itself over mDNS on the node's own address, as a deployed one does.
        """
        old = self.endpoint(node)
        agent = [
            str(self.python), "-m", "sparksync_agent", "serve", "--port", "0",
            "--advertise" if advertise else "--no-advertise", "--sample-hz", str(sample_hz),
        ]  # fmt: skip
        node_id = shlex.quote(Registry().get(name).node_id)
        script = (
            f'mkdir -p "$HOME/{LAYOUT.state_dir}" && '
            f'(umask 077 && printf "%s\\n" {node_id} >"$HOME/{LAYOUT.node_id}") && '
            f'setsid nohup {shlex.join(agent)} --state-dir "$HOME/{LAYOUT.state_dir}" '
            '>"$HOME/lab-agent.log" 2>&1 </dev/null & echo $!'
        )
        result = self._ssh(node, name, ["sh", "-c", script])
        pid = int(result.strip())
        self.pids.setdefault(node.name, []).append(pid)
        return self._wait_endpoint(node, pid, old)

    def stop(self, node: LabNode, sig: int = signal.SIGTERM) -> None:
        """Stop the node's agents with ``sig`` and wait until they are gone."""
        pids = self.pids.pop(node.name, [])
        _signal_and_wait(pids, sig)

    def stop_all(self) -> None:
        for name in list(self.pids):
            _signal_and_wait(self.pids.pop(name), signal.SIGKILL)

    def start_many(self, nodes: list[LabNode], sample_hz: float = 2.0) -> list[AgentEndpoint]:
        with ThreadPoolExecutor(len(nodes)) as pool:
            return list(pool.map(lambda n: self.start(n, n.name, sample_hz), nodes))

    # --- internals ----------------------------------------------------------------------------

    def _ssh(self, node: LabNode, name: str, argv: list[str]) -> str:
        pinned = Registry().get(name).host_key
        endpoint = Endpoint(node.ip, 22, self.ssh_lab.user(node), name)
        transport = connect_with_key(endpoint, pinned, self.client_key.pkey, self.ssh_lab.dialer, SSH)
        try:
            done = run(transport, argv, 30)
        finally:
            transport.close()
        if done.exit_status != 0:
            raise RuntimeError(f"{argv} on {node.name} failed: {done.stderr.decode(errors='replace')}")
        return done.stdout.decode()

    def _wait_endpoint(self, node: LabNode, pid: int, old: AgentEndpoint | None) -> AgentEndpoint:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            endpoint = self.endpoint(node)
            if endpoint is not None and endpoint != old and endpoint.pid == pid:
                return endpoint
            if not psutil.pid_exists(pid):
                break
            time.sleep(0.05)
        log = self.home(node) / "lab-agent.log"
        text = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
        raise RuntimeError(f"the agent on {node.name} did not publish its endpoint: {text}")


def _signal_and_wait(pids: list[int], sig: int, timeout_s: float = 20.0) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout_s
    while any(_running(pid) for pid in pids):
        if time.monotonic() > deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + timeout_s
        time.sleep(0.02)


def _running(pid: int) -> bool:
    try:
        if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
            return True
    except psutil.NoSuchProcess:
        return False
    # A killed process's first thread turns zombie while its other threads are still ending (one
    # in a slow write ends only when the write does), and its sockets close with the last of them.
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except FileNotFoundError:
        return False
