"""A lab of N "nodes" on one machine: network namespaces joined by a bridge.

Follows /work/shared/LAB.md: the bridge lives in a hub namespace of its own and
every link is created from inside a lab namespace, so the host's own network
is never touched. Each node gets ``eth0`` with ``10.77.X.i/24`` (X picked per
lab) and a multicast route, so mDNS works between nodes.

Names carry the owner's pid and a random token (``sslab-<pid>-<tok>-n1``), so
concurrent or aborted runs never collide and a later run can reap labs whose
owner is gone. Labs made from the command line have owner pid 0.

Extending: a ``NodeService`` (e.g. an sshd per node) is started with
``Lab.add_service`` and stopped by ``teardown`` before the namespaces go.

Usable as a script, as root::

    python tests/lab/netlab.py up 3        # prints the lab as JSON
    python tests/lab/netlab.py list
    python tests/lab/netlab.py down [ID]   # no ID: every lab whose owner is gone
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

PREFIX = "sslab"
MAX_NODES = 200
_TERM_GRACE_S = 2.0
_IP_TIMEOUT_S = 15


class LabError(RuntimeError):
    """A lab could not be built or fully removed."""


@dataclass
class LabNode:
    name: str  # "n1", "n2", ...
    netns: str
    ip: str
    index: int
    iface: str = "eth0"
    prefix_len: int = 24
    # Room for per-node facts that services add (e.g. an sshd port, a user).
    extra: dict[str, Any] = field(default_factory=dict)


class NodeService:
    """Something a lab runs on its nodes (e.g. sshd). Subclass and override both."""

    def start(self, lab: Lab, node: LabNode) -> None:
        raise NotImplementedError

    def stop(self, lab: Lab, node: LabNode) -> None:
        """Stop gracefully. Anything left behind is killed with the namespace anyway."""


# --- ip(8) and process helpers -------------------------------------------------------


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``ip ARGS``; a failure raises LabError with ip's own message."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=_IP_TIMEOUT_S)
    if check and done.returncode != 0:
        raise LabError(f"'ip {' '.join(args)}' failed: {done.stderr.strip() or done.returncode}")
    return done


def list_netns() -> list[str]:
    # "ip netns list" prints "NAME (id: N)" or just "NAME".
    return [line.split()[0] for line in ip("netns", "list").stdout.splitlines() if line.strip()]


def netns_pids(netns: str) -> list[int]:
    done = ip("netns", "pids", netns, check=False)
    return [int(pid) for pid in done.stdout.split()] if done.returncode == 0 else []


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def kill_netns_processes(netns: str, grace_s: float = _TERM_GRACE_S) -> None:
    """SIGTERM every process in ``netns``, then SIGKILL what is left after ``grace_s``."""
    _signal_all(netns_pids(netns), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while netns_pids(netns) and time.monotonic() < deadline:
        time.sleep(0.05)
    _signal_all(netns_pids(netns), signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    while netns_pids(netns) and time.monotonic() < deadline:
        time.sleep(0.05)


def _stop_popen(proc: subprocess.Popen, grace_s: float = _TERM_GRACE_S) -> None:
    """Stop and reap a child we started, so it leaves no zombie behind."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(grace_s)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


# --- lab identity ------------------------------------------------------------------


def lab_prefix(lab_id: str) -> str:
    return f"{PREFIX}-{lab_id}-"


def owner_pid(lab_id: str) -> int:
    return int(lab_id.split("-", 1)[0])


def existing_labs() -> dict[str, list[str]]:
    """Lab id -> its namespaces, for every lab on this machine."""
    labs: dict[str, list[str]] = {}
    for name in list_netns():
        parts = name.split("-")
        if len(parts) == 4 and parts[0] == PREFIX and parts[1].isdigit():
            labs.setdefault(f"{parts[1]}-{parts[2]}", []).append(name)
    return labs


def remove_lab(lab_id: str) -> None:
    """Kill every process in the lab's namespaces and delete them. Idempotent."""
    names = existing_labs().get(lab_id, [])
    for name in names:
        kill_netns_processes(name)
    # Nodes first: their veth peers then vanish from the hub with them.
    for name in sorted(names, key=lambda n: n.endswith("-hub")):
        ip("netns", "del", name, check=False)
    left = existing_labs().get(lab_id)
    if left:
        raise LabError(f"lab {lab_id}: {left} are still there; remove each with 'ip netns del NAME'.")


def _is_stale(lab_id: str, include_cli: bool) -> bool:
    pid = owner_pid(lab_id)
    return include_cli if pid == 0 else not _pid_alive(pid)


def reap_stale_labs(include_cli: bool = False) -> list[str]:
    """Remove labs whose owner process is gone (aborted runs). Returns their ids.

    Labs made from the command line (owner 0) have no owner to outlive, so
    they go only with ``include_cli`` (``netlab.py down``), never from a test run.
    """
    stale = [lab_id for lab_id in existing_labs() if _is_stale(lab_id, include_cli)]
    for lab_id in stale:
        remove_lab(lab_id)
    return stale


def netns_usable() -> str | None:
    """None when this process can make network namespaces, else the reason why not."""
    if os.geteuid() != 0:
        return "network-namespace lab needs root (run the lab tests as root, as CI does)"
    probe = f"{PREFIX}-probe{os.getpid()}"
    try:
        ip("netns", "add", probe)
        ip("netns", "del", probe)
    except (OSError, LabError) as exc:
        if isinstance(exc, FileNotFoundError):
            return "the 'ip' command (iproute2) is not installed"
        return f"'ip netns' does not work here: {exc}"
    return None


# --- the lab -------------------------------------------------------------------------


class Lab:
    """N nodes, each a network namespace with ``eth0`` on a bridge in a hub namespace."""

    def __init__(self, n: int, owner: int | None = None) -> None:
        if not 1 <= n <= MAX_NODES:
            raise ValueError(f"a lab has 1 to {MAX_NODES} nodes, not {n}")
        token = secrets.token_hex(2)
        self.id = f"{os.getpid() if owner is None else owner}-{token}"
        # Each lab is its own L2 island, so this only keeps addresses easy to tell apart.
        self.subnet = f"10.77.{int(token, 16) % 254 + 1}"
        self.hub = lab_prefix(self.id) + "hub"
        self.nodes = [
            LabNode(name=f"n{i}", netns=f"{lab_prefix(self.id)}n{i}", ip=f"{self.subnet}.{i}", index=i)
            for i in range(1, n + 1)
        ]
        self._procs: list[subprocess.Popen] = []
        self._services: list[tuple[NodeService, LabNode]] = []

    @classmethod
    def create(cls, n: int, owner: int | None = None) -> Lab:
        """Build a lab; on any failure what was built is removed before the error is raised."""
        lab = cls(n, owner)
        try:
            lab._build()
        except BaseException:
            lab.teardown()
            raise
        return lab

    def _build(self) -> None:
        ip("netns", "add", self.hub)
        ip("-n", self.hub, "link", "set", "lo", "up")
        # Snooping off: with no querier on the bridge it would drop mDNS multicast.
        ip("-n", self.hub, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
        ip("-n", self.hub, "link", "set", "br0", "up")
        for node in self.nodes:
            self._build_node(node)

    def _build_node(self, node: LabNode) -> None:
        ns, port = node.netns, f"p{node.index}"
        ip("netns", "add", ns)
        ip("-n", ns, "link", "set", "lo", "up")
        # Created from inside the node's namespace: the host namespace never sees either end.
        ip("-n", ns, "link", "add", node.iface, "type", "veth", "peer", "name", port, "netns", self.hub)
        ip("-n", self.hub, "link", "set", port, "master", "br0")
        ip("-n", self.hub, "link", "set", port, "up")
        ip("-n", ns, "addr", "add", f"{node.ip}/{node.prefix_len}", "dev", node.iface)
        ip("-n", ns, "link", "set", node.iface, "multicast", "on")
        ip("-n", ns, "link", "set", node.iface, "up")
        ip("-n", ns, "route", "add", "224.0.0.0/4", "dev", node.iface)

    def node(self, name: str) -> LabNode:
        return next(node for node in self.nodes if node.name == name)

    # --- running things inside nodes ---------------------------------------------

    @staticmethod
    def wrap(node: LabNode, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", node.netns, *argv]

    def exec(self, node: LabNode, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        """Run ``argv`` inside ``node`` to completion (text output captured, 60 s limit by default)."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        kwargs.setdefault("timeout", 60)
        return subprocess.run(self.wrap(node, argv), **kwargs)

    def popen(self, node: LabNode, argv: list[str], **kwargs: Any) -> subprocess.Popen:
        """Start ``argv`` inside ``node``; teardown stops it if the caller has not."""
        # ip netns exec exec()s argv, so the Popen's pid is argv's own pid.
        proc = subprocess.Popen(self.wrap(node, argv), **kwargs)
        self._procs.append(proc)
        return proc

    @staticmethod
    def read_line(proc: subprocess.Popen, timeout_s: float) -> str:
        """The next line of ``proc``'s stdout (a pipe), "" at EOF; TimeoutError after ``timeout_s``.

        Reads the pipe's descriptor directly, one byte at a time, so no line is
        left hidden in a Python buffer where select() cannot see it.
        """
        fd, line = proc.stdout.fileno(), bytearray()
        deadline = time.monotonic() + timeout_s
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise TimeoutError(f"no line from {proc.args!r} within {timeout_s} s (got {bytes(line)!r})")
            chunk = os.read(fd, 1)
            if not chunk:
                break
            line += chunk
        return line.decode()

    def add_service(self, service: NodeService, nodes: list[LabNode] | None = None) -> None:
        """Start ``service`` on ``nodes`` (default all); teardown stops it first."""
        for node in self.nodes if nodes is None else nodes:
            self._services.append((service, node))
            service.start(self, node)

    # --- teardown ------------------------------------------------------------------

    def teardown(self) -> None:
        """Stop services and processes, then delete every namespace. Idempotent."""
        while self._services:
            service, node = self._services.pop()
            try:
                service.stop(self, node)
            except Exception:
                log.warning("stopping %r on %s failed; killing its namespace anyway", service, node.name)
        while self._procs:
            _stop_popen(self._procs.pop())
        remove_lab(self.id)

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "hub": self.hub, "nodes": [_node_dict(node) for node in self.nodes]}

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()


def _node_dict(node: LabNode) -> dict[str, Any]:
    return {"name": node.name, "netns": node.netns, "ip": node.ip}


# --- command line --------------------------------------------------------------------

_USAGE = "usage: netlab.py up N | down [LAB_ID ...] | list"


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("up", "down", "list"):
        print(_USAGE, file=sys.stderr)
        return 2
    reason = netns_usable()
    if reason:
        print(f"netlab: {reason}", file=sys.stderr)
        return 1
    command, args = argv[0], argv[1:]
    if command == "up":
        lab = Lab.create(int(args[0]) if args else 2, owner=0)
        print(json.dumps(lab.describe(), indent=2))
        hint = f"run in a node: ip netns exec {lab.nodes[0].netns} CMD; remove: netlab.py down {lab.id}"
        print(hint, file=sys.stderr)
    elif command == "list":
        print(json.dumps(existing_labs(), indent=2))
    else:
        for lab_id in args:
            remove_lab(lab_id)
        print(json.dumps({"removed": args or reap_stale_labs(include_cli=True)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
