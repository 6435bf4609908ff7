"""Static facts about the node, read once at agent start.

The SSH host-key fingerprints let the client cross-check, at pairing time,
the key that SSH presents against what the node itself reports.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
import platform
import socket
from pathlib import Path

from sparksync_agent.protocol import NodeInfo

log = logging.getLogger(__name__)

# Firmware placeholders that name no machine.
_PLACEHOLDER_MODELS = {"", "to be filled by o.e.m.", "default string", "system product name", "none"}


def fingerprint_of_public_key_line(line: str) -> str:
    """'SHA256:<unpadded base64 of sha256(key blob)>', exactly as ``ssh-keygen -lf`` prints it.

    ``line`` is one OpenSSH public key line: '<type> <base64 blob> [comment]'.
    """
    parts = line.split()
    if len(parts) < 2:
        raise ValueError(f"not an OpenSSH public key line (expected '<type> <base64> [comment]'): {line!r}")
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except binascii.Error as exc:
        raise ValueError(f"the key data of this public key line is not valid base64: {exc}") from exc
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii")
    return "SHA256:" + digest.rstrip("=")


def host_key_fingerprints(etc_root: Path = Path("/etc")) -> dict[str, str]:
    """Key type as SSH names it (e.g. 'ssh-ed25519', the name paramiko's get_name() gives) -> fingerprint."""
    fingerprints: dict[str, str] = {}
    for path in sorted((etc_root / "ssh").glob("ssh_host_*_key.pub")):
        try:
            line = path.read_text(encoding="ascii").strip()
            fingerprints[line.split()[0]] = fingerprint_of_public_key_line(line)
        except (OSError, UnicodeDecodeError, ValueError, IndexError) as exc:
            log.info("skipping host key %s: %s", path, exc)
    return fingerprints


def _read_text(path: Path) -> str | None:
    try:
        return path.read_bytes().replace(b"\0", b"").decode("utf-8", "replace").strip()
    except OSError:
        return None


def machine_model(proc_root: Path = Path("/proc"), sys_root: Path = Path("/sys")) -> str | None:
    """The DMI product (or board) name, else the device-tree model, else None."""
    dmi = sys_root / "class" / "dmi" / "id"
    for path in (dmi / "product_name", dmi / "board_name", proc_root / "device-tree" / "model"):
        text = _read_text(path)
        if text and text.lower() not in _PLACEHOLDER_MODELS:
            return text
    return None


def os_pretty_name(etc_root: Path = Path("/etc")) -> str:
    text = _read_text(etc_root / "os-release") or ""
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "PRETTY_NAME":
            return value.strip().strip("\"'")
    return platform.system()


def boot_time(proc_root: Path = Path("/proc")) -> float:
    """Unix time of boot, from the ``btime`` line of /proc/stat."""
    for line in (_read_text(proc_root / "stat") or "").splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise ValueError(f"{proc_root / 'stat'} has no btime line; is {proc_root} a Linux procfs?")


def read_node_info(
    node_id: str,
    proc_root: Path = Path("/proc"),
    sys_root: Path = Path("/sys"),
    etc_root: Path = Path("/etc"),
) -> NodeInfo:
    return NodeInfo(
        node_id=node_id,
        hostname=socket.gethostname(),
        model=machine_model(proc_root, sys_root),
        arch=platform.machine(),
        os=os_pretty_name(etc_root),
        kernel=platform.release(),
        cpu_count=os.cpu_count() or 1,
        boot_time=boot_time(proc_root),
        ssh_host_key_fingerprints=host_key_fingerprints(etc_root),
    )
