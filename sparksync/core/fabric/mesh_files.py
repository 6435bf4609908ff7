"""Pure edits of the three files the node-to-node mesh writes in each node's ``~/.ssh``.

- ``authorized_keys``: each peer's mesh key, restricted with ``from=`` to the
  fabric subnets, tagged ``sparksync-mesh:<node id>`` so it can be told apart
  and removed again (by its key, as ``core.ssh.authorized_keys`` does);
- ``known_hosts``: each peer's pinned host key under its fabric addresses;
  lines hashed by ``HashKnownHosts`` are understood too;
- ``config``: one managed block (a ``Host`` entry per peer: its user and the
  mesh key), so plain ``ssh <fabric address>`` (mpirun, rsync) works.

Every line we do not own comes back byte for byte.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sparksync.core.nodes.registry import PinnedHostKey, sha256_fingerprint
from sparksync.core.ssh import authorized_keys

MESH_TAG = "sparksync-mesh"
MESH_KEY_FILE = ".ssh/id_ed25519_sparksync"
BLOCK_BEGIN = "# >>> sparksync fabric mesh (managed by SparkSync; edits here are replaced)"
BLOCK_END = "# <<< sparksync fabric mesh"


def mesh_comment(node_id: str) -> str:
    return f"{MESH_TAG}:{node_id}"


# --- authorized_keys -----------------------------------------------------------------------------


def authorized_line(public_line: str, subnets: Sequence[str], node_id: str) -> str:
    """The authorized_keys line for a peer's mesh key: only from the fabric, no forwarding of agents or X11."""
    fields = public_line.split()
    if len(fields) < 2 or authorized_keys.key_blob(public_line) is None:
        raise ValueError(f"not a public key line: {public_line[:40]!r}")
    if not subnets:
        raise ValueError("a mesh key needs at least one fabric subnet to come from")
    options = f'from="{",".join(subnets)}",no-agent-forwarding,no-X11-forwarding'
    return f"{options} {fields[0]} {fields[1]} {mesh_comment(node_id)}"


def add_authorized(content: bytes, line: str) -> bytes:
    """``content`` with ``line``; an older line of the same key (other subnets) is replaced."""
    return authorized_keys.add_key(authorized_keys.remove_key(content, line), line) if not _has_line(
        content, line
    ) else content


def _has_line(content: bytes, line: str) -> bool:
    return any(raw.rstrip(b"\r\n") == line.encode() for raw in authorized_keys.split_lines(content))


# --- known_hosts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class KnownHostsConflict:
    """A line already in known_hosts that gives one of our addresses another key."""

    host: str
    fingerprint: str  # of the key that line holds
    line_number: int


def known_hosts_line(addresses: Sequence[str], pinned: PinnedHostKey, node_id: str) -> str:
    return f"{','.join(addresses)} {pinned.key_type} {pinned.key_base64} {mesh_comment(node_id)}"


def add_known_host(content: bytes, addresses: Sequence[str], pinned: PinnedHostKey, node_id: str) -> bytes:
    """``content`` with the peer's line; our own older lines for those addresses or that node go first.

    Lines of the same key type that others wrote for these addresses are
    left alone here: ``conflicts`` finds those first and the mesh stops on them.
    """
    tag = mesh_comment(node_id).encode()
    hosts = set(addresses)
    kept = [
        raw
        for raw in authorized_keys.split_lines(content)
        if not (_is_ours(raw) and (raw.rstrip().endswith(tag) or hosts & set(_hosts_of(raw))))
    ]
    body = b"".join(kept)
    separator = b"\n" if body and not body.endswith(b"\n") else b""
    return body + separator + known_hosts_line(addresses, pinned, node_id).encode() + b"\n"


def remove_known_host(content: bytes, node_id: str) -> bytes:
    """``content`` without the lines we wrote for ``node_id``."""
    tag = mesh_comment(node_id).encode()
    return b"".join(
        raw for raw in authorized_keys.split_lines(content) if not (_is_ours(raw) and raw.rstrip().endswith(tag))
    )


def conflicts(content: bytes, addresses: Iterable[str], pinned: PinnedHostKey) -> list[KnownHostsConflict]:
    """Lines not ours that name one of ``addresses`` with another key of the pinned key's type.

    ssh with StrictHostKeyChecking=yes refuses such a host, so the mesh
    names them (with both fingerprints) instead of writing over them.
    """
    found = []
    for number, raw in enumerate(authorized_keys.split_lines(content), start=1):
        fields = raw.decode("latin-1").split()
        if _is_ours(raw) or len(fields) < 3 or fields[0].startswith("#") or fields[0].startswith("@"):
            continue
        if fields[1] != pinned.key_type or fields[2] == pinned.key_base64:
            continue
        for host in addresses:
            if _names(fields[0], host):
                found.append(KnownHostsConflict(host, _fingerprint_of(fields[2]), number))
    return found


def _is_ours(raw: bytes) -> bool:
    fields = raw.split()
    return len(fields) >= 4 and fields[-1].startswith(MESH_TAG.encode() + b":")


def _hosts_of(raw: bytes) -> list[str]:
    fields = raw.decode("latin-1").split()
    return fields[0].split(",") if fields else []


def _names(pattern_field: str, host: str) -> bool:
    """Whether a known_hosts host field names ``host`` (plain, ``[host]:22`` or hashed ``|1|salt|hash``)."""
    for entry in pattern_field.split(","):
        if entry.startswith("|1|"):
            parts = entry.split("|")
            try:
                salt, digest = base64.b64decode(parts[2]), base64.b64decode(parts[3])
            except (IndexError, binascii.Error, ValueError):
                continue
            if hmac.compare_digest(hmac.new(salt, host.encode(), hashlib.sha1).digest(), digest):
                return True
        elif entry in (host, f"[{host}]:22"):
            return True
    return False


def _fingerprint_of(key_base64: str) -> str:
    try:
        return sha256_fingerprint(base64.b64decode(key_base64, validate=True))
    except (binascii.Error, ValueError):
        return "(unreadable key)"


# --- ~/.ssh/config --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PeerEntry:
    node_id: str
    name: str
    addresses: tuple[str, ...]
    user: str


def config_block(peers: Sequence[PeerEntry]) -> str:
    lines = [BLOCK_BEGIN]
    for peer in peers:
        lines += [
            f"# node {peer.node_id} ({peer.name})",
            f"Host {' '.join(peer.addresses)}",
            f"    User {peer.user}",
            f"    IdentityFile ~/{MESH_KEY_FILE}",
            "    IdentitiesOnly yes",
            "    StrictHostKeyChecking yes",
        ]
    lines.append(BLOCK_END)
    return "\n".join(lines) + "\n"


def set_config_block(content: bytes, block: str | None) -> bytes:
    """``content`` with our block replaced by ``block`` (None: removed). It goes first, so it wins.

    ssh takes the first value it sees for each option, so the block leads the
    file; anything the user wrote stays, after it.
    """
    text = content.decode("utf-8", errors="surrogateescape")
    start, end = text.find(BLOCK_BEGIN), text.find(BLOCK_END)
    if start != -1 and end != -1 and end > start:
        stop = text.find("\n", end)
        text = text[:start] + text[len(text) if stop == -1 else stop + 1 :]
    new = (block or "") + text
    return new.encode("utf-8", errors="surrogateescape")


def config_block_of(content: bytes) -> str | None:
    text = content.decode("utf-8", errors="surrogateescape")
    start, end = text.find(BLOCK_BEGIN), text.find(BLOCK_END)
    if start == -1 or end == -1:
        return None
    stop = text.find("\n", end)
    return text[start : len(text) if stop == -1 else stop + 1]


def drop_peer(block: str | None, node_id: str) -> str | None:
    """The block without ``node_id``'s entry; None when no peer is left."""
    if block is None:
        return None
    lines = block.splitlines()[1:-1]
    entries: list[list[str]] = []
    for line in lines:
        if line.startswith("# "):
            entries.append([line])
        elif entries:
            entries[-1].append(line)
    kept = [entry for entry in entries if not entry[0].startswith(f"# node {node_id} ")]
    if not kept:
        return None
    return "\n".join([BLOCK_BEGIN, *(line for entry in kept for line in entry), BLOCK_END]) + "\n"
