"""Helpers for model tests on lab nodes: node-to-node SSH keys, a node's store, shaped links.

``mesh_keys`` sets up node-to-node SSH the way the cluster's mesh does: a key
of each node's own (``~/.ssh/id_ed25519``), every other node's public key in
its ``authorized_keys``, and a ``known_hosts`` written from the nodes' real
host keys (pinned, never accepted unseen). Without it, nodes cannot reach
each other and copies are relayed through this computer.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

from .netlab import LabNode
from .sshd import SshLab

STORE = ".local/share/sparksync/models"  # the agent's default store for a node user


def chown_tree(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    for p in [path, *path.rglob("*")]:
        os.chown(p, entry.pw_uid, entry.pw_gid, follow_symlinks=False)


def store_of(ssh_lab: SshLab, node: LabNode) -> Path:
    return ssh_lab.service.home(node) / STORE


def give(ssh_lab: SshLab, node: LabNode, path: Path) -> None:
    """Hand ``path`` and the folders above it up to the node user's home to that user."""
    home = ssh_lab.service.home(node)
    chown_tree(path, ssh_lab.user(node))
    parent = path.parent
    while parent != home and home in parent.parents:
        chown_tree_one(parent, ssh_lab.user(node))
        parent = parent.parent


def chown_tree_one(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def mesh_keys(ssh_lab: SshLab, nodes: list[LabNode]) -> None:
    pubs: dict[str, str] = {}
    for node in nodes:
        ssh_dir = ssh_lab.service.home(node) / ".ssh"
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        key = ssh_dir / "id_ed25519"
        key.unlink(missing_ok=True)
        key.with_suffix(".pub").unlink(missing_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"mesh-{node.name}", "-f", str(key)],
                       check=True)  # fmt: skip
        pubs[node.name] = key.with_name("id_ed25519.pub").read_text().strip()
    host_keys = {
        node.name: ssh_lab.service.nodes[node.name].host_key.with_name("ssh_host_ed25519_key.pub").read_text().split()
        for node in nodes
    }
    for node in nodes:
        ssh_dir = ssh_lab.service.home(node) / ".ssh"
        with (ssh_dir / "authorized_keys").open("a") as fh:
            for other in nodes:
                if other.name != node.name:
                    fh.write(pubs[other.name] + "\n")
        known = [f"{other.ip} {host_keys[other.name][0]} {host_keys[other.name][1]}"
                 for other in nodes if other.name != node.name]  # fmt: skip
        (ssh_dir / "known_hosts").write_text("\n".join(known) + "\n")
        for path in ssh_dir.iterdir():
            path.chmod(0o600 if path.name != "id_ed25519.pub" else 0o644)
        chown_tree(ssh_dir, ssh_lab.user(node))


def drop_mesh(ssh_lab: SshLab, nodes: list[LabNode]) -> None:
    for node in nodes:
        for name in ("id_ed25519", "id_ed25519.pub", "known_hosts"):
            (ssh_lab.service.home(node) / ".ssh" / name).unlink(missing_ok=True)


def shape(ssh_lab: SshLab, node: LabNode, rate: str) -> None:
    """Cap the node's link (egress), so a copy is bound by the link, not by the CPUs.

    A token bucket (tbf): this kernel has no netem; tbf is what caps a rate anyway.
    """
    ssh_lab.lab.exec(node, ["tc", "qdisc", "replace", "dev", node.iface, "root", "tbf", "rate", rate,
                            "burst", "64kbit", "latency", "400ms"], check=True)  # fmt: skip


def unshape(ssh_lab: SshLab, node: LabNode) -> None:
    ssh_lab.lab.exec(node, ["tc", "qdisc", "del", "dev", node.iface, "root"], check=False)


def small_disk(ssh_lab: SshLab, node: LabNode, agent_pid: int, path: Path, size: str) -> None:
    """A tmpfs of ``size`` at ``path``, mounted inside the node agent's own mount namespace."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["nsenter", "-t", str(agent_pid), "-m", "mount", "-t", "tmpfs", "-o", f"size={size},mode=0755",
                    "tmpfs", str(path)], check=True)  # fmt: skip
    entry = pwd.getpwnam(ssh_lab.user(node))
    subprocess.run(["nsenter", "-t", str(agent_pid), "-m", "chown", f"{entry.pw_uid}:{entry.pw_gid}", str(path)],
                   check=True)  # fmt: skip


def unmount(agent_pid: int, path: Path) -> None:
    subprocess.run(["nsenter", "-t", str(agent_pid), "-m", "umount", "-l", str(path)], check=False)


def same_files(a: Path, b: Path) -> bool:
    files_a = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file() and not p.name.startswith("."))
    files_b = sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file() and not p.name.startswith("."))
    return files_a == files_b and all((a / f).read_bytes() == (b / f).read_bytes() for f in files_a)


def rmtree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
