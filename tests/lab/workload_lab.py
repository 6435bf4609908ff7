"""Helpers for workload tests on lab nodes: a fabric network, files the test users can read, engine I/O.

Lab nodes talk over ``eth0`` (management, where sshd listens). Workloads need
a fabric: ``add_fabric`` gives every node a second link named like a DGX
Spark's ConnectX-7 port (``enp1s0f0np0``) on its own subnet, so the agent
reports it as a fabric interface and the launches use it (rpc-server
addresses, ``--master_addr``, ``GLOO_SOCKET_IFNAME``) exactly as on Sparks.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil
from typing_extensions import Self

from sparksync.core.fleet.fleet import Fleet
from sparksync.core.ssh.tunnel import Tunnel
from sparksync_agent.supervisor.keeper import SPARE_NAME

from .netlab import Lab, LabNode, ip

FABRIC_IFACE = "enp1s0f0np0"
WAIT_S = 120.0


def add_fabric(lab: Lab, nodes: list[LabNode]) -> dict[str, str]:
    """A fabric link per node on the lab's bridge, on a subnet of its own; node name -> fabric IP."""
    third = lab.subnet.split(".")[2]
    addresses = {}
    for node in nodes:
        peer = f"f{node.index}"
        ip(
            "-n",
            node.netns,
            "link",
            "add",
            FABRIC_IFACE,
            "type",
            "veth",
            "peer",
            "name",
            peer,
            "netns",
            lab.hub,
        )
        ip("-n", lab.hub, "link", "set", peer, "master", "br0")
        ip("-n", lab.hub, "link", "set", peer, "up")
        address = f"10.78.{third}.{node.index}"
        ip("-n", node.netns, "addr", "add", f"{address}/24", "dev", FABRIC_IFACE)
        ip("-n", node.netns, "link", "set", FABRIC_IFACE, "up")
        addresses[node.name] = address
    return addresses


def wait_fabric_reported(agents: Fleet, names: list[str]) -> None:
    """Until every agent's latest sample shows the fabric link up with its address."""

    def reported(name: str) -> bool:
        snap = agents.call(name, lambda c: c.snapshot())
        nets = snap.latest.net if snap.latest else None
        return any(i.name == FABRIC_IFACE and i.is_up and i.addresses for i in nets or [])

    wait_for(lambda: all(reported(n) for n in names), "the agents reporting the fabric link")


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = WAIT_S, poll_s: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(poll_s)


class SharedDir:
    """A temp dir every lab user can read (root's tmp dirs are 0700): models, scripts."""

    def __init__(self, prefix: str = "sparksync-wl-"):
        self.path = Path(tempfile.mkdtemp(prefix=prefix))
        self.path.chmod(0o755)

    def publish(self) -> None:
        for path in [self.path, *self.path.rglob("*")]:
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)

    def script(self, name: str, text: str) -> Path:
        path = self.path / name
        path.write_text(text)
        path.chmod(0o755)
        return path

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def user_processes(user: str, keep: set[int]) -> list[str]:
    """The user's processes besides ``keep`` (its agents) and sshd sessions, as 'pid cmdline'."""
    found = []
    for proc in psutil.process_iter(["pid", "username", "cmdline", "name", "status"]):
        info = proc.info
        if info["username"] != user or info["pid"] in keep or info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if (info["name"] or "").startswith("sshd") or _spare_of_agent(proc, info["name"], keep):
            continue
        found.append(f"{info['pid']} {' '.join(info['cmdline'] or [])[:120]}")
    return found


def _spare_of_agent(proc: psutil.Process, name: str | None, agents: set[int]) -> bool:
    """The spare keeper an agent keeps ready for its next rank: part of the agent, not a leftover."""
    try:
        return name == SPARE_NAME and proc.ppid() in agents
    except psutil.Error:
        return False


def engine_tunnel(fleet: Fleet, node: str, port: int) -> Tunnel:
    """A local port forwarded to ``127.0.0.1:port`` on the node, as the app reaches an engine."""
    return Tunnel(lambda stop: fleet.transports.get(node, 15.0, stop), "127.0.0.1", port, label=node)


def first_token_s(base_url: str, max_tokens: int = 8, prompt: str = "hello") -> float:
    """Seconds from sending a streamed chat request to its first content token."""
    body = {
        "model": "tiny", "messages": [{"role": "user", "content": prompt}], "stream": True,
        "max_tokens": max_tokens, "ignore_eos": True,
    }  # fmt: skip
    began = time.perf_counter()
    with httpx.stream(
        "POST", f"{base_url}/v1/chat/completions", json=body, timeout=120, trust_env=False
    ) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith("data: ") and '"content"' in line:
                return time.perf_counter() - began
    raise AssertionError("the stream ended without a token")


class ChatLoad:
    """Streams chat completions back to back in a thread until stopped; counts what came back."""

    def __init__(self, base_url: str, max_tokens: int = 48):
        self.base_url, self.max_tokens = base_url, max_tokens
        self.completions = self.tokens = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chat-load")

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        body = {
            "model": "tiny", "messages": [{"role": "user", "content": "tell me about the cluster"}],
            "stream": True, "max_tokens": self.max_tokens, "ignore_eos": True,
        }  # fmt: skip
        # A new connection per request, as independent clients would make.
        limits = httpx.Limits(max_keepalive_connections=0)
        with httpx.Client(timeout=120, trust_env=False, limits=limits) as http:
            while not self._stop.is_set():
                try:
                    with http.stream("POST", f"{self.base_url}/v1/chat/completions", json=body) as response:
                        response.raise_for_status()
                        for line in response.iter_lines():
                            if line.startswith("data: ") and '"content"' in line:
                                self.tokens += 1
                    self.completions += 1
                except httpx.HTTPError as exc:
                    self.errors.append(str(exc))
                    self._stop.wait(0.2)
