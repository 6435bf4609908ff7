"""Real ``sparksync-agent serve`` processes inside lab nodes, for the lab benchmarks.

Each agent runs in its node's network namespace, so its API is on that
node's own 127.0.0.1 and its mDNS (with ``--advertise``) goes out on that
node's ``eth0`` only. The lab nodes share this machine's hostname and its
/etc/ssh, so eight agents would advertise one hostname and one host key and
a client would rightly merge them into one machine. ``identity`` gives an
agent what a real node has: its own hostname (a UTS namespace) and its own
SSH host key (a private bind mount over /etc/ssh, inside the mount namespace
that ``ip netns exec`` already gives each command; the host never sees it).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from sparksync_agent.state import read_endpoint, read_token
from tests.lab.netlab import Lab, LabNode, _stop_popen

STARTUP_TIMEOUT_S = 30.0
STOP_GRACE_S = 5.0
# hostname and the bind mount happen inside the command's own namespaces, then sh execs the agent,
# so the Popen's pid is the agent's.
_IDENTITY_SCRIPT = 'mount --bind "$1" /etc/ssh && hostname "$2" && shift 2 && exec "$@"'


def missing_tools() -> str | None:
    """None when agents can get an identity of their own here, else what is missing."""
    for tool in ("unshare", "mount", "hostname", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: apt-get install util-linux hostname openssh-client)"
    return None


@dataclass(frozen=True)
class Identity:
    hostname: str
    ssh_dir: Path  # holds ssh_host_ed25519_key{,.pub}; shown to the agent as /etc/ssh


@dataclass
class LabAgent:
    node: LabNode
    proc: subprocess.Popen
    state_dir: Path
    log_path: Path
    port: int
    token: str
    identity: Identity | None = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM (the agent sends its mDNS goodbye and exits), SIGKILL after a grace; reaped."""
        _stop_popen(self.proc, STOP_GRACE_S)


def make_identity(workdir: Path, hostname: str) -> Identity:
    ssh_dir = workdir / "etc-ssh"
    ssh_dir.mkdir(parents=True, exist_ok=True)
    key = ssh_dir / "ssh_host_ed25519_key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", hostname, "-f", str(key)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return Identity(hostname, ssh_dir)


def host_key_fingerprint(identity: Identity) -> str:
    pub = identity.ssh_dir / "ssh_host_ed25519_key.pub"
    done = subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True, check=True)
    return done.stdout.split()[1]


def start_agent(
    lab: Lab, node: LabNode, workdir: Path, *serve_args: str, identity: Identity | None = None
) -> subprocess.Popen:
    """Start the agent in ``node`` without waiting; ``wait_ready`` waits for it."""
    workdir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "sparksync_agent", "serve", "--port", "0",
            "--state-dir", str(workdir / "state"), *serve_args]  # fmt: skip
    if identity is not None:
        wrapper = ["unshare", "--uts", "--", "sh", "-c", _IDENTITY_SCRIPT, "sh"]
        argv = [*wrapper, str(identity.ssh_dir), identity.hostname, *argv]
    with (workdir / "agent.log").open("wb") as log:
        return lab.popen(node, argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)


def wait_ready(
    node: LabNode, proc: subprocess.Popen, workdir: Path, identity: Identity | None = None
) -> LabAgent:
    """The agent once it has published its endpoint (with --advertise, after announcing itself)."""
    state_dir, log_path = workdir / "state", workdir / "agent.log"
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"agent in {node.name} exited with {proc.returncode}:\n{_tail(log_path)}")
        endpoint = read_endpoint(state_dir)
        if endpoint is not None and endpoint.pid == proc.pid:
            token = read_token(state_dir) or ""
            return LabAgent(node, proc, state_dir, log_path, endpoint.port, token, identity)
        time.sleep(0.05)
    raise AssertionError(f"agent in {node.name} did not publish its endpoint in time:\n{_tail(log_path)}")


def _tail(log_path: Path) -> str:
    return log_path.read_text(errors="replace")[-3000:]
