"""Helpers for deploying to lab nodes: the lab's bundle, bundles of other agent versions, paired nodes.

- ``lab_bundle``: the real bundle for the lab nodes' python3 (/usr/bin/python3,
  x86_64), built once per session from the package index (tests/core/bundle_helpers).
- ``versioned_bundle``: a copy of it whose agent says it is another version,
  optionally one whose ``serve`` fails at start (to force a rollback).
- ``pair_all``: pair lab nodes through the real pairing code, in parallel.
- ``stop_lab_agents``: kill every agent and supervisor the test users run.
"""

from __future__ import annotations

import base64
import hashlib
import os
import pwd
import signal
import subprocess
import tarfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
from sparksync_agent.protocol import AGENT_VERSION
from sparksync_agent.supervisor.keeper import SPARE_NAME

from sparksync.core.bundle.archive import pack
from sparksync.core.bundle.manifest import file_entry
from sparksync.core.bundle.platforms import Target, target_for_machine
from sparksync.core.bundle.verify import verify_bundle
from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.nodes.registry import Registry
from sparksync.core.ssh.connection import SshSettings
from sparksync.core.ssh.pairing import PairRequest, pair_node
from tests.core.bundle_helpers import session_bundle
from tests.lab.sshd import PASSWORD, SshLab

NODE_PYTHON = "/usr/bin/python3"  # what the lab's test users get as python3
FAST = SshSettings(
    connect_timeout_s=3,
    handshake_timeout_s=10,
    auth_timeout_s=20,
    command_timeout_s=60,
    keepalive_s=2,
    dead_after_s=10,
)
BROKEN_DAEMON = 'raise RuntimeError("this agent build fails at start on purpose")\n'


def node_target() -> Target:
    done = subprocess.run(
        [
            NODE_PYTHON,
            "-c",
            "import platform, sys; print(platform.machine(), '%d.%d' % sys.version_info[:2])",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    machine, version = done.stdout.split()
    return target_for_machine(machine, version)


def lab_bundle(tmp_path_factory) -> Path:
    """The real bundle for the lab nodes, built once per test session."""
    return session_bundle(tmp_path_factory, node_target())


def versioned_bundle(base: Path, version: str, dest_dir: Path, *, broken: bool = False) -> Path:
    """``base`` with its agent wheel re-versioned to ``version`` (and ``serve`` broken if asked)."""
    work = dest_dir / f".work-{version}"
    with tarfile.open(base, "r:gz") as tar:
        tar.extractall(work, filter="data")
    (folder,) = work.iterdir()
    manifest = verify_bundle(base)
    old_wheel = folder / manifest.agent_wheel
    new_name = manifest.agent_wheel.replace(f"-{AGENT_VERSION}-", f"-{version}-")
    _rewrite_agent_wheel(old_wheel, folder / new_name, version, broken)
    old_wheel.unlink()
    (folder / "manifest.json").unlink()
    files = [file_entry(p) for p in sorted(folder.glob("*.whl"))]
    installs = [new_name if n == manifest.agent_wheel else n for n in manifest.installs or []] or None
    new_manifest = manifest.model_copy(
        update={"agent_version": version, "agent_wheel": new_name, "files": files, "installs": installs}
    )
    archive = dest_dir / manifest.target.bundle_name(version)
    pack(archive, new_manifest, folder)
    verify_bundle(archive, agent_version=version)
    subprocess.run(["rm", "-rf", str(work)], check=True)
    return archive


def _rewrite_agent_wheel(src: Path, dest: Path, version: str, broken: bool) -> None:
    old_info, new_info = f"sparksync_agent-{AGENT_VERSION}.dist-info", f"sparksync_agent-{version}.dist-info"
    records: list[str] = []
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as new:
        for item in old.infolist():
            name = item.filename.replace(old_info, new_info)
            if name.endswith("/RECORD"):
                continue
            data = _changed(name, old.read(item), version, broken)
            new.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append(f"{name},sha256={digest},{len(data)}")
        records.append(f"{new_info}/RECORD,,")
        new.writestr(f"{new_info}/RECORD", "\n".join(records) + "\n")


def _changed(name: str, data: bytes, version: str, broken: bool) -> bytes:
    if name == "sparksync_agent/_version.py":  # the agent's version only; the protocol's stays
        old, new = f'__version__ = "{AGENT_VERSION}"\n', f'__version__ = "{version}"\n'
        return data.replace(old.encode(), new.encode())
    if name.endswith("/METADATA"):
        return data.replace(f"\nVersion: {AGENT_VERSION}\n".encode(), f"\nVersion: {version}\n".encode())
    if broken and name == "sparksync_agent/daemon.py":
        return BROKEN_DAEMON.encode()
    return data


def pair_all(
    ssh_lab: SshLab, client_key: ClientKey, nodes=None, registry: Registry | None = None
) -> list[str]:
    """Pair ``nodes`` (default: all) through the real pairing code; their names, in order."""
    nodes = ssh_lab.nodes if nodes is None else nodes
    registry = registry if registry is not None else Registry()

    def one(node) -> str:
        result = pair_node(
            PairRequest(node.ip, ssh_lab.user(node), name=node.name),
            password=lambda: PASSWORD,
            confirm=lambda fingerprint: True,
            client_key=client_key,
            registry=registry,
            dialer=ssh_lab.dialer,
            settings=FAST,
        )
        return result.node.name

    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        return list(pool.map(one, nodes))


# --- what runs on the nodes --------------------------------------------------------------


def user_processes(user: str) -> list[psutil.Process]:
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        return []
    found = []
    for proc in psutil.process_iter(["uids", "status"]):
        if (
            proc.info["uids"]
            and proc.info["uids"].real == uid
            and proc.info["status"] != psutil.STATUS_ZOMBIE
        ):
            found.append(proc)
    return found


def agent_processes(user: str) -> list[psutil.Process]:
    """The user's supervisors and agents (``sparksync_agent`` / ``sparksync-agent`` in the command line).

    An agent's spare keeper is not counted: it is part of its agent and ends with it (EOF on its pipe).
    """
    procs = []
    for proc in user_processes(user):
        try:
            cmdline, name = " ".join(proc.cmdline()), proc.name()
        except psutil.Error:
            continue
        if name == SPARE_NAME:
            continue
        if "sparksync_agent" in cmdline or "sparksync-agent" in cmdline:
            procs.append(proc)
    return procs


def stop_lab_agents(users: list[str], timeout_s: float = 10.0) -> list[str]:
    """SIGTERM, then SIGKILL, every agent process of ``users``; what had to be stopped."""
    procs = [proc for user in users for proc in agent_processes(user)]
    names = [f"{proc.pid} ({' '.join(proc.cmdline())[:80]})" for proc in procs if proc.is_running()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for proc in procs:
            try:
                proc.send_signal(sig)
            except psutil.Error:
                pass
        _gone, alive = psutil.wait_procs(procs, timeout=timeout_s / 2)
        procs = alive
        if not procs:
            break
    return names


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s} s")
        time.sleep(0.05)


def home_of(user: str) -> Path:
    return Path(pwd.getpwnam(user).pw_dir)


def sshd_pid(ssh_lab: SshLab, node) -> int:
    return ssh_lab.service.nodes[node.name].proc.pid


def in_node_mounts(ssh_lab: SshLab, node, script: str, *args: str) -> subprocess.CompletedProcess:
    """``sh -c script`` in the mount namespace of the node's sshd (what its SSH sessions see)."""
    argv = [
        "nsenter",
        "--target",
        str(sshd_pid(ssh_lab, node)),
        "--mount",
        "--",
        "sh",
        "-c",
        script,
        "sh",
        *args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env={**os.environ, "LC_ALL": "C"})
