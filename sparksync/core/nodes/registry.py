"""The node registry: paired nodes, their pinned host keys and fabric interfaces.

One JSON file (``nodes.json`` in the config dir) with a format version. It
holds no secrets: the key's passphrase and agent tokens live in the keyring.

Each node has a stable ``node_id`` (see ``identity``), fixed at pairing and
kept through renames and re-pairs; its name is a label. The names a node had
before are kept (``former_names``) so data written under a name, before ids
existed, still finds its node after a rename.

Format versions: 1 had no ids (``node_id`` was always null); reading it
gives every node the id of its pinned host key, and the next change writes
version 2.

Rules that users rely on:

- At most ``MAX_NODES`` nodes; a ninth is refused with a way to free a slot.
- A file that is corrupt, or written by a newer SparkSync, is never
  overwritten: every read and every change refuses, naming the file.
- Changes are read-modify-write under an exclusive lock, so two clients
  pairing at once never lose each other's entry.
"""

from __future__ import annotations

import base64
import builtins
import hashlib
import json
import logging
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from sparksync_agent.atomic import write_atomic

from sparksync.core.agents.this_computer import is_local
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.base.file_lock import exclusive_lock
from sparksync.core.base.paths import config_dir, ensure_dir
from sparksync.core.nodes.identity import NODE_ID_RE, node_id_from_fingerprint

if TYPE_CHECKING:  # annotations only: listing nodes loads no SSH stack
    import paramiko

log = logging.getLogger(__name__)

REGISTRY_VERSION = 2
MAX_NODES = 8
MAX_FORMER_NAMES = 8  # enough to follow a few renames; older names hold no data written since ids came
REGISTRY_FILE = "nodes.json"

# Names become SSH ``Host`` aliases and file names, so they stay shell- and
# ssh_config-safe: no spaces, quotes, wildcards or '%'.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_USER_RE = re.compile(r"^[A-Za-z0-9._][A-Za-z0-9._-]{0,31}$")
# A hostname, IPv4 or IPv6 address (with an optional %zone).
_HOST_RE = re.compile(r"^[A-Za-z0-9._:%-]{1,253}$")


class RegistryError(SparkSyncError):
    """Base of the registry's errors."""


class RegistryUnreadableError(RegistryError):
    """The registry file is corrupt or from a newer SparkSync; it is left untouched."""


class RegistryConflictError(RegistryError):
    """Another SparkSync process changed the registry since this one read it."""


class ClusterFullError(RegistryError):
    """The cluster already holds MAX_NODES nodes."""

    exit_code = 17  # its own code: a script can tell "no free slot" from a failed pairing


class DuplicateNodeError(RegistryError):
    """A node with that name (or that host key, or that id) is already paired."""


class UnknownNodeError(RegistryError):
    """No paired node has that name (or id)."""


class InvalidNodeNameError(RegistryError):
    """A node name that cannot serve as an SSH alias and file name."""


class HostKeyChangedError(RegistryError):
    """A node presented a host key other than the one pinned at pairing."""


class PinnedHostKey(BaseModel):
    """A node's SSH host key, pinned at pairing (trust on first use)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key_type: str  # e.g. "ssh-ed25519", as in known_hosts
    key_base64: str  # the public key blob, as in known_hosts
    fingerprint: str  # "SHA256:...", as ssh-keygen -l prints it

    @classmethod
    def from_pkey(cls, pkey: paramiko.PKey) -> PinnedHostKey:
        return cls(key_type=pkey.get_name(), key_base64=pkey.get_base64(), fingerprint=pkey.fingerprint)

    @model_validator(mode="after")
    def _consistent(self) -> PinnedHostKey:
        # A hand-edited or damaged entry must not pin something other than what it shows.
        try:
            blob = base64.b64decode(self.key_base64, validate=True)
        except ValueError as exc:
            raise ValueError("key_base64 is not base64") from exc
        if sha256_fingerprint(blob) != self.fingerprint:
            raise ValueError("fingerprint does not match key_base64")
        if _blob_key_type(blob) != self.key_type:
            raise ValueError("key_type does not match key_base64")
        return self

    def matches(self, pkey: paramiko.PKey) -> bool:
        return pkey.get_name() == self.key_type and pkey.get_base64() == self.key_base64

    def verify(self, pkey: paramiko.PKey, node_name: str) -> None:
        """Raise HostKeyChangedError unless ``pkey`` is the pinned key."""
        if not self.matches(pkey):
            raise HostKeyChangedError(
                f"The SSH host key of node {node_name!r} has changed: it was pinned as "
                f"{self.fingerprint} ({self.key_type}) and is now {pkey.fingerprint} ({pkey.get_name()}). "
                "This can be an impostor, or the node was reinstalled. SparkSync stops every operation "
                "on this node and will not trust the new key by itself. Check the new fingerprint on the "
                "node (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub), then re-pair it explicitly."
            )


class FabricInterface(BaseModel):
    """A high-speed interface a node reported (e.g. a ConnectX port)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    addresses: list[str] = Field(default_factory=list)
    speed_mbps: int | None = None
    rdma_device: str | None = None


class PairedNode(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str  # a label the user chooses; it can change (rename)
    host: str  # what the user paired with and SSH connects to
    addresses: list[str] = Field(default_factory=list)  # every address seen for this node
    port: int = Field(default=22, ge=1, le=65535)
    user: str
    host_key: PinnedHostKey
    added_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    # The stable id every store keys the node by (see identity); by default its host key's.
    node_id: str = Field(default="", validate_default=True)
    former_names: list[str] = Field(default_factory=list)  # oldest first
    fabric: list[FabricInterface] = Field(default_factory=list)
    agent_version: str | None = None
    service_mode: str | None = None  # how deploy keeps the agent running: "systemd-user" or "supervised"
    deployed_at: datetime | None = None  # when deploy last installed an agent there

    @model_validator(mode="before")
    @classmethod
    def _id_of_host_key(cls, data: object) -> object:
        # A node paired before any agent ran there is known by its pinned host key.
        if isinstance(data, dict) and not data.get("node_id"):
            host_key = data.get("host_key")
            fingerprint = host_key.fingerprint if isinstance(host_key, PinnedHostKey) else (
                host_key.get("fingerprint") if isinstance(host_key, dict) else None
            )
            if isinstance(fingerprint, str):
                try:
                    data = {**data, "node_id": node_id_from_fingerprint(fingerprint)}
                except ValueError:
                    pass  # the host key's own check says what is wrong with it
        return data

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        return _matching(_NAME_RE, value, "letters, digits, '.', '_' or '-' (at most 63)")

    @field_validator("node_id")
    @classmethod
    def _check_node_id(cls, value: str) -> str:
        return _matching(NODE_ID_RE, value, "a node id (4 to 64 letters, digits, '.', '_' or '-')")

    @field_validator("user")
    @classmethod
    def _check_user(cls, value: str) -> str:
        return _matching(_USER_RE, value, "a plain user name")

    @field_validator("host")
    @classmethod
    def _check_host(cls, value: str) -> str:
        return _matching(_HOST_RE, value, "a host name or an IP address")


class RegistryFile(BaseModel):
    """What ``nodes.json`` holds."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1, strict=True)
    nodes: list[PairedNode]

    @model_validator(mode="after")
    def _unique_names(self) -> RegistryFile:
        names = [node.name for node in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError("two nodes share a name")
        ids = [node.node_id for node in self.nodes]
        if len(set(ids)) != len(ids):
            raise ValueError("two nodes share a node id")
        return self


class Registry:
    """The paired nodes, kept in ``path``.

    Reads load lazily. Every change (add, remove, rename, update) runs in a
    ``transaction()``: lock, reload from disk, change, save. Several changes
    can share one transaction::

        with registry.transaction():
            registry.remove("a")
            registry.add(node)
    """

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else config_dir() / REGISTRY_FILE
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self._nodes: list[PairedNode] = []
        self._loaded_digest: str | None = None  # hash of the bytes last read; None: never read
        self._thread_lock = threading.RLock()
        self._depth = 0

    # -- reading -------------------------------------------------------------

    def load(self) -> list[PairedNode]:
        """(Re)read the file. A missing file is an empty registry."""
        self._read()
        return self.list()

    def list(self) -> list[PairedNode]:
        self._ensure_loaded()
        return [node.model_copy(deep=True) for node in self._nodes]

    def names(self) -> builtins.list[str]:
        self._ensure_loaded()
        return [node.name for node in self._nodes]

    def identities(self) -> builtins.list[tuple[str, str, tuple[str, ...]]]:
        """Each node's (id, name, former names): what ``NodeNames`` needs, without copying every entry."""
        self._ensure_loaded()
        return [(node.node_id, node.name, tuple(node.former_names)) for node in self._nodes]

    def get(self, name: str) -> PairedNode:
        """The node named ``name`` (or whose id it is)."""
        self._ensure_loaded()
        return self._find(name).model_copy(deep=True)

    def get_by_id(self, node_id: str) -> PairedNode:
        self._ensure_loaded()
        for node in self._nodes:
            if node.node_id == node_id:
                return node.model_copy(deep=True)
        raise UnknownNodeError(f"No paired node has the id {node_id!r}. See `sparksync node list`.")

    def __contains__(self, name: object) -> bool:
        self._ensure_loaded()
        return any(node.name == name for node in self._nodes)

    def __len__(self) -> int:
        self._ensure_loaded()
        return len(self._nodes)

    # -- changing ------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[Registry]:
        """Lock, reload, yield, save. On an exception nothing is saved and memory is reverted."""
        with self._thread_lock:
            if self._depth:  # nested: the outer transaction already holds the lock
                self._depth += 1
                try:
                    yield self
                finally:
                    self._depth -= 1
                return
            with self._locked():
                self._read()
                before = list(self._nodes)
                self._depth = 1
                try:
                    yield self
                except BaseException:
                    self._nodes = before
                    raise
                finally:
                    self._depth = 0
                if self._nodes != before:
                    self._write()

    def add(self, node: PairedNode) -> None:
        with self.transaction():
            self._check_room(node)
            self._nodes.append(node.model_copy(deep=True))
        log.info("registry: added node %s (%s)", node.name, node.host)

    def remove(self, name: str) -> PairedNode:
        with self.transaction():
            node = self._find(name)
            self._nodes.remove(node)
        log.info("registry: removed node %s", name)
        return node

    def rename(self, old: str, new: str) -> PairedNode:
        """Give node ``old`` (a name or id) the name ``new``; its id, and so its data, stay."""
        with self.transaction():
            node = self._find(old)
            if new == node.name:
                return node.model_copy(deep=True)
            self._refuse_taken_name(new)
            former = [n for n in node.former_names if n not in (node.name, new)] + [node.name]
            renamed = node.model_copy(
                update={"name": check_node_name(new), "former_names": former[-MAX_FORMER_NAMES:]}
            )
            self._replace(node, renamed)
        return renamed.model_copy(deep=True)

    def update(self, node: PairedNode) -> None:
        """Replace the entry with the same node id (fabric, agent version, addresses...)."""
        with self.transaction():
            for current in self._nodes:
                if current.node_id == node.node_id:
                    if node.name != current.name:
                        self._refuse_taken_name(node.name)
                    self._replace(current, node.model_copy(deep=True))
                    return
            raise UnknownNodeError(
                f"No paired node has the id {node.node_id!r} (it was {node.name!r}); it may have been "
                "unpaired meanwhile. See `sparksync node list`."
            )

    def save(self) -> None:
        """Write what is in memory, unless another process changed the file since it was read."""
        with self._thread_lock, self._locked():
            if self._loaded_digest is None:
                self._read()  # never read: establishes what the disk holds first
            on_disk = _read_or_none(self.path)
            if _digest(on_disk) != self._loaded_digest:
                raise RegistryConflictError(
                    f"The node registry {self.path} was changed by another SparkSync since this one "
                    "read it, so nothing was saved. Reload it and make the change again."
                )
            self._write()

    # -- internals -----------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[None]:
        if self._depth:
            yield
            return
        ensure_dir(self.path.parent)
        with exclusive_lock(self.lock_path):
            yield

    def _ensure_loaded(self) -> None:
        if self._loaded_digest is None:
            self._read()

    def _read(self) -> None:
        # Forget the previous contents first: after a failed read nothing may
        # act on a stale copy, and the next access reads (and refuses) again.
        self._nodes, self._loaded_digest = [], None
        raw = _read_or_none(self.path)
        nodes = _parse(raw, self.path) if raw is not None else []
        self._nodes, self._loaded_digest = nodes, _digest(raw)

    def _write(self) -> None:
        data = RegistryFile(version=REGISTRY_VERSION, nodes=self._nodes).model_dump(mode="json")
        raw = (json.dumps(data, indent=2) + "\n").encode()
        ensure_dir(self.path.parent)
        write_atomic(self.path, raw, mode=0o600)
        self._loaded_digest = _digest(raw)

    def _find(self, name: str) -> PairedNode:
        for node in self._nodes:
            if node.name == name:
                return node
        for node in self._nodes:  # an id works wherever a name does
            if node.node_id == name:
                return node
        known = ", ".join(n.name for n in self._nodes) or "none"
        raise UnknownNodeError(
            f"No paired node is named {name!r} (paired: {known}). See `sparksync node list`."
        )

    def _replace(self, old: PairedNode, new: PairedNode) -> None:
        self._nodes[self._nodes.index(old)] = new

    def _check_room(self, node: PairedNode) -> None:
        self._refuse_taken_name(node.name)
        for other in self._nodes:
            if other.host_key.fingerprint == node.host_key.fingerprint:
                raise DuplicateNodeError(
                    f"This machine ({node.host}, host key {node.host_key.fingerprint}) is already "
                    f"paired as {other.name!r}. Use that entry, or unpair it first: "
                    f"`sparksync node unpair {other.name}`."
                )
            if other.node_id == node.node_id:
                raise DuplicateNodeError(
                    f"The node id {node.node_id} of {node.host} is already the id of paired node "
                    f"{other.name!r} (a copied disk image carries its agent's id along). Use that entry, "
                    f"or unpair it first: `sparksync node unpair {other.name}`."
                )
        if len(self._nodes) >= MAX_NODES:
            raise ClusterFullError(
                f"The cluster already has {len(self._nodes)} nodes "
                f"({', '.join(n.name for n in self._nodes)}); SparkSync manages at most {MAX_NODES}. "
                f"To add {node.name!r}, free a slot first: `sparksync node unpair NAME`."
            )

    def _refuse_taken_name(self, name: str) -> None:
        for other in self._nodes:
            if other.name == name:
                raise DuplicateNodeError(
                    f"A node named {name!r} is already paired (host {other.host}). Choose another "
                    f"name, or unpair it first: `sparksync node unpair {name}`."
                )


def check_node_name(name: str) -> str:
    """``name`` if it can be a node's name; InvalidNodeNameError (saying what can) otherwise."""
    if not _NAME_RE.match(name):
        raise InvalidNodeNameError(
            f"{name!r} cannot be a node name: use 1 to 63 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (it becomes an SSH host alias)."
        )
    if is_local(name):
        raise InvalidNodeNameError(
            f"{name!r} cannot be a node name: it means this computer (`--nodes local`); pick another name."
        )
    return name


def sha256_fingerprint(blob: bytes) -> str:
    """The fingerprint of a public key blob, as ``ssh-keygen -l`` prints it."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


def _blob_key_type(blob: bytes) -> str:
    # An SSH public key blob starts with its type as a length-prefixed string.
    if len(blob) < 4:
        raise ValueError("key blob is too short")
    length = int.from_bytes(blob[:4], "big")
    if length > len(blob) - 4:
        raise ValueError("key blob is truncated")
    return blob[4 : 4 + length].decode("ascii", errors="replace")


def _matching(pattern: re.Pattern[str], value: str, what: str) -> str:
    if not pattern.match(value):
        raise ValueError(f"{value!r} is not {what}")
    return value


def _parse(raw: bytes, path: Path) -> list[PairedNode]:
    if not raw.strip():
        raise _unreadable(path, "it is empty")
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _unreadable(path, f"it is not valid JSON ({exc})") from exc
    version = data.get("version") if isinstance(data, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > REGISTRY_VERSION:
        raise RegistryUnreadableError(
            f"The node registry {path} comes from a newer SparkSync (format version {version}; this "
            f"SparkSync reads up to version {REGISTRY_VERSION}). It was left untouched and will not be "
            "changed. Upgrade SparkSync to use it, or move the file away to start an empty registry."
        )
    if isinstance(data, dict) and data.get("version") == 1:
        data = _migrate_v1(data)
    try:
        return RegistryFile.model_validate(data).nodes
    except ValidationError as exc:
        raise _unreadable(path, _first_problem(exc)) from exc


def _migrate_v1(data: dict) -> dict:
    """Version 1 had no ids: each node gets its pinned host key's (the agent's id was never recorded)."""
    nodes = []
    for entry in data.get("nodes") or []:
        if isinstance(entry, dict) and not entry.get("node_id"):
            fingerprint = (entry.get("host_key") or {}).get("fingerprint")
            try:
                entry = {**entry, "node_id": node_id_from_fingerprint(str(fingerprint))}
            except (TypeError, ValueError, AttributeError):
                pass  # validation then names the broken host key
        nodes.append(entry)
    return {**data, "version": REGISTRY_VERSION, "nodes": nodes}


def _unreadable(path: Path, why: str) -> RegistryUnreadableError:
    return RegistryUnreadableError(
        f"The node registry {path} cannot be read: {why}. It was left untouched and SparkSync will "
        f"not change it. Repair it, or move it away (mv '{path}' '{path}.bad') to start an empty "
        "registry and pair your nodes again."
    )


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "top level"
    return f"{where}: {error['msg']}"


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _digest(raw: bytes | None) -> str:
    # A missing file and an empty one differ: the empty one is refused as corrupt.
    return "missing" if raw is None else hashlib.sha256(raw).hexdigest()
