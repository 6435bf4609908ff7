"""Node-to-node SSH over the fabric: every node reaches every other as plain ``ssh <fabric address>``.

Set up (``setup_mesh``), all nodes in parallel, in three phases:

1. **Verify** (nothing changes yet): each node scans the SSH host keys its
   peers present on their fabric addresses (``ssh-keyscan``) and each must be
   the key SparkSync pinned for that peer at pairing. A different key stops
   everything, naming both fingerprints; so does a line already in a node's
   ``known_hosts`` that gives a peer's address another key, or an address a
   node cannot reach.
2. **Keys:** each node gets a key of its own, generated on the node
   (``~/.ssh/id_ed25519_sparksync``; an existing one is kept). No private
   key ever leaves its node, and no key is shared.
3. **Write:** into each node's ``authorized_keys`` the peers' public keys,
   restricted with ``from=`` to the fabric subnets; into its ``known_hosts``
   the peers' pinned host keys under their fabric addresses (never trust on
   first use); into its ``~/.ssh/config`` one managed block naming each peer's
   user and the mesh key.

If any node fails in phase 2 or 3, every change already made is undone (a
key generated in this run is deleted, each edited file put back) and the
error names each node's failure. What was set up is saved in
``<config dir>/mesh.json`` (each node's public mesh key and fabric
addresses), so unpairing a node (``remove_from_mesh``) can take its key and
host key off every other node.

``check_mesh`` proves it: every node runs ``ssh -o BatchMode=yes -o
StrictHostKeyChecking=yes`` to each peer's fabric addresses that it shares a
subnet with.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sparksync_agent.atomic import write_atomic

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.base.paths import config_dir, ensure_dir
from sparksync.core.fabric import mesh_files
from sparksync.core.fabric.fabric_links import FabricLinks
from sparksync.core.fabric.node_shell import NodeShell, script
from sparksync.core.nodes.registry import PinnedHostKey, Registry, sha256_fingerprint
from sparksync.core.ssh import authorized_keys

log = logging.getLogger(__name__)

MESH_FILE = "mesh.json"
MESH_VERSION = 1
AUTHORIZED_KEYS = ".ssh/authorized_keys"
KNOWN_HOSTS = ".ssh/known_hosts"
SSH_CONFIG = ".ssh/config"
COMMAND_TIMEOUT_S = 60.0
SSH_CONNECT_TIMEOUT_S = 5
KEYSCAN_ATTEMPTS = 4

Progress = Callable[["MeshProgress"], None]


class MeshError(SparkSyncError):
    """The mesh could not be set up (or taken down); nothing was left half-done."""


class MeshHostKeyMismatchError(MeshError):
    """A peer presents (or a known_hosts line holds) another host key than the one SparkSync pinned."""


@dataclass(frozen=True)
class MeshProgress:
    node: str
    step: str  # "verify", "key", "authorize", "known hosts", "config", "undo", "check", "remove"
    state: str  # "running", "done", "failed"
    detail: str = ""


@dataclass(frozen=True)
class MeshMember:
    name: str
    node_id: str
    user: str
    host_key: PinnedHostKey
    addresses: tuple[str, ...]


@dataclass(frozen=True)
class MeshPlan:
    members: tuple[MeshMember, ...]
    subnets: tuple[str, ...]
    links: FabricLinks

    def member(self, name: str) -> MeshMember:
        return next(m for m in self.members if m.name == name)

    def peers(self, name: str) -> list[MeshMember]:
        return [m for m in self.members if m.name != name]

    def routes(self, source: str, target: str) -> list[str]:
        """``target``'s addresses on the subnets ``source`` shares with it."""
        return list(dict.fromkeys(end.address for _own, end in self.links.routes(source, target)))


def plan_mesh(links: FabricLinks, registry: Registry | None = None) -> MeshPlan:
    """The mesh of the fabric's nodes; each must be paired (its user and pinned host key)."""
    registry = registry if registry is not None else Registry()
    names = links.nodes()
    if len(names) < 2:
        raise MeshError("The fabric has fewer than two nodes; there is no mesh to set up. Plan the fabric first.")
    members = []
    for name in names:
        node = registry.get(name)
        members.append(MeshMember(node.name, node.node_id, node.user, node.host_key, tuple(links.addresses(name))))
    return MeshPlan(tuple(members), tuple(links.subnets()), links)


# --- what was set up -----------------------------------------------------------------------------


class MeshEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str  # at setup; the id is what counts
    public_line: str  # its mesh key, "ssh-ed25519 AAAA... comment"
    addresses: list[str]


class MeshFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = MESH_VERSION
    updated_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    subnets: list[str] = Field(default_factory=list)
    members: dict[str, MeshEntry] = Field(default_factory=dict)  # by node id


def mesh_path() -> Path:
    return config_dir() / MESH_FILE


def load_mesh(path: Path | None = None) -> MeshFile:
    path = path or mesh_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return MeshFile()
    except OSError as exc:
        raise MeshError(f"cannot read the mesh file {path} ({exc.strerror}).") from None
    try:
        mesh = MeshFile.model_validate_json(raw)
    except ValidationError as exc:
        raise MeshError(f"the mesh file {path} cannot be read ({exc.errors()[0]['msg']}); fix or remove it.") from None
    if mesh.version > MESH_VERSION:
        raise MeshError(f"the mesh file {path} is format {mesh.version}, newer than this SparkSync reads; upgrade.")
    return mesh


def save_mesh(mesh: MeshFile, path: Path | None = None) -> Path:
    path = path or mesh_path()
    ensure_dir(path.parent)
    write_atomic(path, mesh.model_dump_json(indent=2) + "\n", mode=0o600)
    return path


# --- setting it up -------------------------------------------------------------------------------


@dataclass
class _Undo:
    """What one node's setup changed, to put back if another node fails."""

    key_created: bool = False
    files: dict[str, tuple[bytes, bytes]] = field(default_factory=dict)  # relpath -> (before, written)


@dataclass(frozen=True)
class MeshSetupResult:
    plan: MeshPlan
    keys: dict[str, str]  # node name -> its public mesh key line
    created: list[str]  # the nodes whose key was generated now
    path: Path


def setup_mesh(
    shell: NodeShell, plan: MeshPlan, progress: Progress | None = None, *, mesh_file: Path | None = None
) -> MeshSetupResult:
    tell = progress or (lambda _p: None)
    names = [m.name for m in plan.members]
    _each(names, lambda name: _verify(shell, plan, name, tell), "verify", tell)
    undo = {name: _Undo() for name in names}
    keys: dict[str, str] = {}
    lock = threading.Lock()

    def make_key(name: str) -> None:
        line, created = _ensure_key(shell, name, plan.member(name))
        with lock:
            keys[name] = line
        undo[name].key_created = created

    try:
        _each(names, make_key, "key", tell)
        _each(names, lambda name: _write(shell, plan, name, keys, undo[name], tell), "write", tell)
    except MeshError:
        _undo_all(shell, undo, tell)
        raise
    members = {m.node_id: MeshEntry(name=m.name, public_line=keys[m.name], addresses=list(m.addresses))
               for m in plan.members}
    saved = load_mesh(mesh_file)
    saved = saved.model_copy(update={"members": {**saved.members, **members}, "subnets": list(plan.subnets),
                                     "updated_at": datetime.now(timezone.utc)})
    path = save_mesh(saved, mesh_file)
    # A node that left while one of these could not be reached: its keys go now.
    for node_id in [i for i in saved.members if i not in members]:
        removal = remove_from_mesh(shell, node_id, names, mesh_file=mesh_file, progress=tell)
        if removal.failed:
            log.warning("mesh: %s's keys are still on %s", node_id, ", ".join(removal.failed))
    created = [name for name in names if undo[name].key_created]
    log.info("mesh set up on %d nodes (%d new keys)", len(names), len(created))
    return MeshSetupResult(plan, keys, created, path)


def _each(names: Sequence[str], work: Callable[[str], None], step: str, tell: Progress) -> None:
    """``work(name)`` on every node at once; MeshError naming every node that failed."""
    failures: dict[str, BaseException] = {}

    def one(name: str) -> None:
        try:
            work(name)
        except (SparkSyncError, OSError, ValueError) as exc:
            failures[name] = exc
            tell(MeshProgress(name, step, "failed", str(exc)))

    with ThreadPoolExecutor(max(1, len(names)), thread_name_prefix=f"mesh-{step}") as pool:
        list(pool.map(one, names))
    if not failures:
        return
    mismatches = [exc for exc in failures.values() if isinstance(exc, MeshHostKeyMismatchError)]
    lines = "\n".join(f"  {name}: {failures[name]}" for name in names if name in failures)
    cls = MeshHostKeyMismatchError if mismatches else MeshError
    what = "Nothing was changed on any node." if step == "verify" else "Every change made was undone."
    raise cls(f"The mesh could not be set up ({step} failed on {len(failures)} of {len(names)} nodes):\n"
              f"{lines}\n{what}")


def _verify(shell: NodeShell, plan: MeshPlan, name: str, tell: Progress) -> None:
    tell(MeshProgress(name, "verify", "running"))
    missing = _run(shell, name, script("for t in ssh ssh-keygen ssh-keyscan; do command -v $t >/dev/null || "
                                        "echo $t; done"), "look for the ssh tools").split()
    if missing:
        raise MeshError(f"{', '.join(missing)} missing on {name}; install openssh-client there")
    targets = {addr: peer for peer in plan.peers(name) for addr in plan.routes(name, peer.name)}
    if not targets:
        raise MeshError(f"{name} shares no fabric subnet with any other node; apply the fabric plan first")
    types = ",".join(_keyscan_type(t) for t in sorted({peer.host_key.key_type for peer in targets.values()}))
    seen = _scan(shell, name, list(targets), types)
    known = shell.read(name, KNOWN_HOSTS)
    problems: list[str] = []
    mismatch = False
    for address, peer in targets.items():
        pinned = peer.host_key
        keys = [blob for kind, blob in seen.get(address, []) if kind == pinned.key_type]
        if not keys:
            problems.append(f"{peer.name} at {address} did not answer on SSH port 22 from {name} "
                            "(is the fabric up, and sshd listening on that address?)")
        elif pinned.key_base64 not in keys:
            mismatch = True
            problems.append(
                f"{peer.name} at {address} presents the host key {_fingerprint(keys[0])} ({pinned.key_type}), "
                f"but SparkSync pinned {pinned.fingerprint} for it at pairing. Another machine may answer at "
                f"that address, or {peer.name} was reinstalled (then re-pair it)")
        for conflict in mesh_files.conflicts(known, [address], pinned):
            mismatch = True
            problems.append(
                f"line {conflict.line_number} of ~/{KNOWN_HOSTS} on {name} gives {address} ({peer.name}) the host "
                f"key {conflict.fingerprint}, but SparkSync pinned {pinned.fingerprint}; remove that line "
                f"(ssh-keygen -R {address}) and run the mesh again")
    if problems:
        cls = MeshHostKeyMismatchError if mismatch else MeshError
        raise cls("; ".join(problems))
    tell(MeshProgress(name, "verify", "done", f"{len(targets)} peer address(es) present their pinned keys"))


def _scan(shell: NodeShell, name: str, addresses: list[str], types: str) -> dict[str, list[tuple[str, str]]]:
    """address -> [(key type, base64)] that ``name`` sees there.

    sshd drops unauthenticated connections beyond its MaxStartups (10 by
    default) at random, and every node scans every peer at once: an address
    that gave no answer is asked again, alone, a few times.
    """
    seen: dict[str, list[tuple[str, str]]] = {}
    pending = list(addresses)
    for attempt in range(KEYSCAN_ATTEMPTS):
        if not pending:
            break
        if attempt:
            time.sleep(random.uniform(0.2, 0.8))
        batches = [pending] if attempt == 0 else [[a] for a in pending]
        for batch in batches:
            argv = ["ssh-keyscan", "-T", str(SSH_CONNECT_TIMEOUT_S), "-t", types, *batch]
            for line in shell.run(name, argv, COMMAND_TIMEOUT_S).stdout.decode(errors="replace").splitlines():
                fields = line.split()
                if len(fields) >= 3 and not line.startswith("#"):
                    seen.setdefault(fields[0], []).append((fields[1], fields[2]))
        pending = [a for a in pending if a not in seen]
    return seen


def _keyscan_type(key_type: str) -> str:
    return {"ssh-ed25519": "ed25519", "ssh-rsa": "rsa", "ssh-dss": "dsa"}.get(
        key_type, "ecdsa" if key_type.startswith("ecdsa") else key_type
    )


def _fingerprint(key_base64: str) -> str:
    import base64

    return sha256_fingerprint(base64.b64decode(key_base64))


def _ensure_key(shell: NodeShell, name: str, member: MeshMember) -> tuple[str, bool]:
    key = mesh_files.MESH_KEY_FILE
    comment = f"{mesh_files.mesh_comment(member.node_id)}@{name}"
    text = (
        'umask 077; mkdir -p -m 700 "$HOME/.ssh" || exit 3; created=0; '
        'if [ ! -f "$HOME/$1" ]; then ssh-keygen -q -t ed25519 -N "" -C "$2" -f "$HOME/$1" </dev/null '
        '>/dev/null || exit 4; created=1; fi; echo "created=$created"; cat "$HOME/$1.pub"'
    )
    out = _run(shell, name, script(text, key, comment), "make its mesh key").splitlines()
    created = bool(out) and out[0] == "created=1"
    public = next((line for line in out[1:] if authorized_keys.key_blob(line) is not None), None)
    if public is None:
        raise MeshError(f"{name}'s mesh key ~/{key}.pub could not be read")
    return public.strip(), created


def _write(shell: NodeShell, plan: MeshPlan, name: str, keys: dict[str, str], undo: _Undo,
           tell: Progress) -> None:
    peers = plan.peers(name)

    def authorize(content: bytes) -> bytes:
        for peer in peers:
            content = mesh_files.add_authorized(
                content, mesh_files.authorized_line(keys[peer.name], plan.subnets, peer.node_id))
        return content

    def know(content: bytes) -> bytes:
        for peer in peers:
            content = mesh_files.add_known_host(content, peer.addresses, peer.host_key, peer.node_id)
        return content

    entries = [mesh_files.PeerEntry(p.node_id, p.name, p.addresses, p.user) for p in peers]
    block = mesh_files.config_block(entries)
    for step, relpath, change in (("authorize", AUTHORIZED_KEYS, authorize), ("known hosts", KNOWN_HOSTS, know),
                                  ("config", SSH_CONFIG, lambda c: mesh_files.set_config_block(c, block))):
        tell(MeshProgress(name, step, "running"))
        try:
            _edit_recorded(shell, name, relpath, change, undo)
        except (SparkSyncError, OSError) as exc:
            tell(MeshProgress(name, step, "failed", str(exc)))
            raise
        tell(MeshProgress(name, step, "done"))


def _edit_recorded(shell: NodeShell, name: str, relpath: str, change: Callable[[bytes], bytes],
                   undo: _Undo) -> None:
    def recorded(old: bytes) -> bytes:
        new = change(old)
        if new != old:
            undo.files[relpath] = (old, new)
        return new

    shell.edit(name, relpath, recorded)


def _undo_all(shell: NodeShell, undo: dict[str, _Undo], tell: Progress) -> None:
    def one(name: str) -> None:
        record = undo[name]
        if not record.files and not record.key_created:
            return
        tell(MeshProgress(name, "undo", "running"))
        try:
            for relpath, (before, written) in record.files.items():
                # Put back what was there, unless someone changed the file since we wrote it.
                shell.edit(name, relpath, partial(_put_back, before, written))
            if record.key_created:
                key = mesh_files.MESH_KEY_FILE
                shell.run(name, script('rm -f "$HOME/$1" "$HOME/$1.pub"', key), COMMAND_TIMEOUT_S)
        except (SparkSyncError, OSError) as exc:
            log.error("mesh: undoing the changes on %s failed: %s", name, exc)
            tell(MeshProgress(name, "undo", "failed", str(exc)))
            return
        tell(MeshProgress(name, "undo", "done"))

    with ThreadPoolExecutor(max(1, len(undo)), thread_name_prefix="mesh-undo") as pool:
        list(pool.map(one, list(undo)))


def _put_back(before: bytes, written: bytes, now: bytes) -> bytes:
    return before if now == written else now


def _run(shell: NodeShell, name: str, argv: list[str], what: str) -> str:
    result = shell.run(name, argv, COMMAND_TIMEOUT_S)
    if result.exit_status != 0:
        why = result.stderr.decode(errors="replace").strip() or f"exit status {result.exit_status}"
        raise MeshError(f"could not {what} on {name}: {why}")
    return result.stdout.decode(errors="replace")


# --- checking it ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeshPairResult:
    source: str
    target: str
    address: str | None  # None: the two share no fabric subnet (a ring's non-neighbours)
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class MeshCheckReport:
    pairs: tuple[MeshPairResult, ...]

    @property
    def checked(self) -> list[MeshPairResult]:
        return [p for p in self.pairs if p.address is not None]

    @property
    def failed(self) -> list[MeshPairResult]:
        return [p for p in self.checked if not p.ok]

    @property
    def ok(self) -> bool:
        return bool(self.checked) and not self.failed


_CHECK_SCRIPT = (
    'for t in "$@"; do '
    f'if out=$(ssh -n -o BatchMode=yes -o StrictHostKeyChecking=yes -o ConnectTimeout={SSH_CONNECT_TIMEOUT_S} '
    '"$t" echo sparksync-mesh-ok 2>&1) && [ "${out##*sparksync-mesh-ok}" != "$out" ]; '
    'then echo "ok $t"; else echo "fail $t $(printf %s "$out" | tail -n 1)"; fi; done'
)


def check_mesh(shell: NodeShell, plan: MeshPlan, progress: Progress | None = None) -> MeshCheckReport:
    """Every ordered pair, over every fabric address the two share, with StrictHostKeyChecking=yes."""
    tell = progress or (lambda _p: None)
    results: dict[str, list[MeshPairResult]] = {}

    def one(name: str) -> None:
        tell(MeshProgress(name, "check", "running"))
        targets = {addr: peer.name for peer in plan.peers(name) for addr in plan.routes(name, peer.name)}
        found: list[MeshPairResult] = [MeshPairResult(name, p.name, None, False, "no fabric link between them")
                                       for p in plan.peers(name) if not plan.routes(name, p.name)]
        try:
            result = shell.run(name, script(_CHECK_SCRIPT, *targets), COMMAND_TIMEOUT_S + 10 * len(targets))
            answers = {}
            for line in result.stdout.decode(errors="replace").splitlines():
                word, _, rest = line.partition(" ")
                address, _, detail = rest.partition(" ")
                answers[address] = (word == "ok", detail)
            for address, target in targets.items():
                ok, detail = answers.get(address, (False, "no answer from the check"))
                found.append(MeshPairResult(name, target, address, ok, detail))
        except SparkSyncError as exc:
            found += [MeshPairResult(name, t, a, False, f"could not run the check on {name}: {exc}")
                      for a, t in targets.items()]
        results[name] = found
        bad = [r for r in found if r.address is not None and not r.ok]
        tell(MeshProgress(name, "check", "failed" if bad else "done",
                          f"{len(targets) - len(bad)} of {len(targets)} reached"))

    names = [m.name for m in plan.members]
    with ThreadPoolExecutor(max(1, len(names)), thread_name_prefix="mesh-check") as pool:
        list(pool.map(one, names))
    order = {n: i for i, n in enumerate(names)}
    pairs = sorted((r for rs in results.values() for r in rs), key=lambda r: (order[r.source], order[r.target],
                                                                               r.address or ""))
    return MeshCheckReport(tuple(pairs))


# --- taking a node out ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeshRemoval:
    node_id: str
    cleaned: list[str]  # the nodes that no longer hold its key or host key
    failed: dict[str, str]  # node -> why it could not be cleaned


def remove_from_mesh(shell: NodeShell, node_id: str, others: Sequence[str], *,
                     mesh_file: Path | None = None, progress: Progress | None = None) -> MeshRemoval:
    """Take ``node_id``'s mesh key and host key off every node in ``others`` (by name).

    The node stays in the mesh file while any node still holds it, so a
    later run (or the next unpair attempt) finishes the job.
    """
    tell = progress or (lambda _p: None)
    mesh = load_mesh(mesh_file)
    entry = mesh.members.get(node_id)
    if entry is None:
        return MeshRemoval(node_id, [], {})
    failed: dict[str, str] = {}
    cleaned: list[str] = []
    lock = threading.Lock()

    def one(name: str) -> None:
        tell(MeshProgress(name, "remove", "running", entry.name))
        try:
            shell.edit(name, AUTHORIZED_KEYS, lambda c: authorized_keys.remove_key(c, entry.public_line))
            shell.edit(name, KNOWN_HOSTS, lambda c: mesh_files.remove_known_host(c, node_id))
            shell.edit(name, SSH_CONFIG, lambda c: mesh_files.set_config_block(
                c, mesh_files.drop_peer(mesh_files.config_block_of(c), node_id)))
        except (SparkSyncError, OSError) as exc:
            with lock:
                failed[name] = str(exc)
            tell(MeshProgress(name, "remove", "failed", str(exc)))
            return
        with lock:
            cleaned.append(name)
        tell(MeshProgress(name, "remove", "done", entry.name))

    with ThreadPoolExecutor(max(1, len(others)), thread_name_prefix="mesh-remove") as pool:
        list(pool.map(one, list(others)))
    if not failed:
        forget_member(node_id, mesh_file)
    log.info("mesh: %s removed from %d node(s), %d failed", entry.name, len(cleaned), len(failed))
    return MeshRemoval(node_id, sorted(cleaned), failed)


def forget_member(node_id: str, mesh_file: Path | None = None) -> None:
    """Drop ``node_id`` from the mesh file (no node holds its keys any more)."""
    mesh = load_mesh(mesh_file)
    if node_id in mesh.members:
        members = {k: v for k, v in mesh.members.items() if k != node_id}
        save_mesh(mesh.model_copy(update={"members": members, "updated_at": datetime.now(timezone.utc)}), mesh_file)
