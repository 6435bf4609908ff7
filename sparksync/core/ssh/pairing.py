"""Pairing: make a node trust this client's key, and pin the node's host key.

The steps, each stopping the pairing with a clear error:

1. Read the node's host key (no login yet) and cross-check it with what the
   node advertised over mDNS, if anything: a mismatch is a possible impostor.
   A node already paired under that key is reported as such (idempotent).
   A full cluster is refused here, before anything else happens.
2. ``confirm(fingerprint)`` asks the user (the CLI prompts or checks
   ``--accept-host-key``; the GUI shows a dialog).
3. Log in once with the password, asked only now through ``password()``,
   and only over a connection presenting the confirmed key. The password is
   handed to paramiko and dropped; it is never stored or logged.
4. Install this client's public key in ``~/.ssh/authorized_keys``
   (``remote_keys``), then prove a fresh key-only login works.
5. Record the node in the registry, in one transaction, with its id: the
   node id of the agent already there if one is (read over the same login),
   else its pinned host key's (see ``nodes.identity``).

If anything fails after the key was installed, the key is removed again over
the still-open password session, so nothing is left half-done. Two pairings
of the same node from this computer at once are serialised by a lock file:
the second stops with ``PairingBusyError`` rather than racing the first.

Re-pairing (``repair=True``): for a node whose host key changed, or whose
authorized_keys lost our key. It shows the new key, asks again, reinstalls
our key and replaces the old entry, keeping its id (so all this computer
keeps about the node stays attached) and its name unless one is given.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from pydantic import ValidationError

from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.discovery.advertised import ADVERTISED_WAIT_S, advertised_host_keys
from sparksync.core.discovery.browse import Discovery
from sparksync.core.discovery.model import DiscoveredNode, is_ip, normalize_host
from sparksync.core.base.paths import ensure_dir
from sparksync.core.nodes.identity import is_node_id
from sparksync.core.nodes.registry import MAX_FORMER_NAMES, MAX_NODES, PairedNode, PinnedHostKey, Registry
from sparksync.core.ssh.connection import (
    Dialer,
    Endpoint,
    SshSettings,
    connect_with_key,
    connect_with_password,
    default_dialer,
    probe_host_key,
    run,
)
from sparksync.core.ssh.errors import (
    AuthenticationFailedError,
    HostKeyChangedError,
    HostKeyNotAcceptedError,
    PairingBusyError,
    PairingError,
)
from sparksync.core.ssh.hostkeys import changed_key_message, cross_check_advertised, fingerprint
from sparksync.core.ssh.remote_keys import install_key, uninstall_key
from sparksync.core.ssh.config_export import CONFIG_FILE, export_ssh_config

log = logging.getLogger(__name__)

PasswordSource = Callable[[], str]
ConfirmHostKey = Callable[[str], bool]  # fingerprint -> trust it?
Progress = Callable[[str], None]


@dataclass(frozen=True)
class PairRequest:
    host: str
    user: str
    port: int = 22
    name: str | None = None  # default: the node's own hostname
    advertised_fingerprints: Mapping[str, str] = field(default_factory=dict)  # from mDNS
    repair: bool = False
    # The presented key's fingerprint, named by the user to pair despite a stale advertisement.
    accept_advertised_mismatch: str | None = None

    @classmethod
    def from_discovered(cls, node: DiscoveredNode, user: str, name: str | None = None) -> PairRequest:
        host = node.addresses[0] if is_ip(node.hostname) and node.addresses else node.hostname
        return cls(host, user, node.ssh_port, name, dict(node.host_key_fingerprints))


def with_advertised_keys(
    request: PairRequest,
    *,
    discovery: Discovery | None = None,
    interfaces: list[str] | None = None,
    wait_s: float = ADVERTISED_WAIT_S,
    browse: bool = True,
) -> PairRequest:
    """``request`` with what its host advertises over mDNS, looked up when it carries nothing yet.

    Both faces call this before ``pair_node``, so a typed host is
    cross-checked like one picked from the discovered list.
    """
    if request.advertised_fingerprints:
        return request
    found = advertised_host_keys(
        request.host, request.port, discovery=discovery, interfaces=interfaces, wait_s=wait_s, browse=browse
    )
    return dataclasses.replace(request, advertised_fingerprints=found) if found else request


@dataclass(frozen=True)
class PairResult:
    node: PairedNode
    already_paired: bool = False  # nothing was done: this host key is paired as node.name
    key_installed: bool = False  # False when the node already trusted our key
    replaced: PairedNode | None = None  # the entry a re-pair replaced


@dataclass
class _Session:
    """What pairing learned so far; the password is never part of it."""

    request: PairRequest
    endpoint: Endpoint
    seen: PinnedHostKey
    target: PairedNode | None  # the entry a re-pair replaces


def pair_node(
    request: PairRequest,
    *,
    password: PasswordSource,
    confirm: ConfirmHostKey,
    client_key: ClientKey,
    registry: Registry | None = None,
    dialer: Dialer | None = None,
    settings: SshSettings | None = None,
    progress: Progress | None = None,
) -> PairResult:
    """Pair the node at ``request.host``; see the module docs for the steps."""
    pairing = _Pairing(
        client_key,
        registry if registry is not None else Registry(),
        dialer or default_dialer,
        settings or SshSettings(),
        progress or log.info,
    )
    return pairing.run(request, password, confirm)


@dataclass
class _Pairing:
    client_key: ClientKey
    registry: Registry
    dial: Dialer
    settings: SshSettings
    say: Progress

    def run(self, request: PairRequest, password: PasswordSource, confirm: ConfirmHostKey) -> PairResult:
        target = _repair_target(self.registry, request) if request.repair else None
        endpoint = Endpoint(request.host, request.port, request.user, request.host)
        key = self._probe(endpoint, request, target)
        seen = PinnedHostKey.from_pkey(key)
        with _pairing_lock(self.registry.path.parent, seen.fingerprint, request.host):
            session = _Session(
                request, endpoint, seen, target or _fingerprint_target(self.registry, request, seen)
            )
            already = _check_before_login(self.registry, session, key)
            if already is not None:
                self.say(f"{request.host} is already paired as {already.name!r}")
                return PairResult(already, already_paired=True)
            self._confirm(session, confirm)
            transport = connect_with_password(endpoint, seen, password(), self.dial, self.settings)
            try:
                return self._logged_in(session, transport)
            finally:
                transport.close()

    def _probe(self, endpoint: Endpoint, request: PairRequest, target: PairedNode | None) -> paramiko.PKey:
        prefer = [target.host_key.key_type] if target else list(request.advertised_fingerprints)
        key = probe_host_key(endpoint, self.dial, self.settings, prefer)
        self.say(f"{request.host} presents the host key {key.get_name()} {fingerprint(key)}")
        matched = cross_check_advertised(
            key, request.advertised_fingerprints, request.host, request.accept_advertised_mismatch
        )
        if matched:
            self.say(f"{request.host}'s host key matches what it advertises over mDNS")
        elif request.advertised_fingerprints:
            self.say(f"{request.host}'s host key differs from its mDNS advertisement; accepted as you named it")
        else:
            self.say(
                f"{request.host} advertises no host key over mDNS: only your check of the fingerprint vouches for it"
            )
        return key

    def _confirm(self, session: _Session, confirm: ConfirmHostKey) -> None:
        if session.target is not None:
            old = session.target.host_key.fingerprint
            self.say(f"re-pairing {session.target.name!r}, pinned until now as {old}")
        if not confirm(session.seen.fingerprint):
            raise HostKeyNotAcceptedError(
                f"The host key {session.seen.fingerprint} of {session.request.host} was not accepted, so "
                "nothing was changed. Pair again and accept it once you have checked it on the node "
                "(ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub)."
            )

    def _logged_in(self, session: _Session, transport: paramiko.Transport) -> PairResult:
        node = _new_entry(session, transport, self.settings.command_timeout_s, self.registry)
        _dry_run(self.registry, lambda r: _record(r, node, session.target))  # before any change on the node
        where, line = session.endpoint.where, self.client_key.public_line()
        installed = install_key(transport, line, where)
        self.say(
            f"{'installed' if installed else 'found'} this computer's key in ~/.ssh/authorized_keys on {where}"
        )
        try:
            self._check_key_login(node)
            _record(self.registry, node, session.target)
        except BaseException:
            if installed:
                _undo_install(transport, self.client_key, where)
            raise
        refresh_ssh_export(self.registry, self.client_key)
        self.say(f"paired {node.name!r} ({node.host}, host key {node.host_key.fingerprint})")
        return PairResult(node, key_installed=installed, replaced=session.target)

    def _check_key_login(self, node: PairedNode) -> None:
        """A fresh connection with only our key and the pinned host key must log in."""
        endpoint = Endpoint(node.host, node.port, node.user, node.name)
        try:
            connect_with_key(endpoint, node.host_key, self.client_key.pkey, self.dial, self.settings).close()
        except AuthenticationFailedError as exc:
            raise PairingError(
                f"This computer's key is in ~/.ssh/authorized_keys on {endpoint.where}, but the node does "
                "not accept it for logins, so pairing was undone. Its sshd may read keys from elsewhere "
                "(AuthorizedKeysFile in /etc/ssh/sshd_config) or refuse them because the home directory or "
                "~/.ssh is writable by others (StrictModes; fix with chmod go-w ~ ~/.ssh). Then pair again."
            ) from exc
        self.say(f"key login to {endpoint.where} works")


def _check_before_login(registry: Registry, session: _Session, key: paramiko.PKey) -> PairedNode | None:
    """The entry already pairing this key (nothing to do), or None; raises when pairing must stop."""
    request, seen = session.request, session.seen
    if session.target is not None:
        return None
    for node in registry.list():
        if node.host_key.fingerprint == seen.fingerprint:
            return node
        if _same_host(node, request.host):
            raise HostKeyChangedError(changed_key_message(node.name, request.host, node.host_key, key))
    if len(registry) >= MAX_NODES:  # refused before the password is even asked for
        _dry_run(registry, lambda r: r.add(_provisional(registry, session)))
    return None


def _new_entry(
    session: _Session, transport: paramiko.Transport, timeout: float, registry: Registry
) -> PairedNode:
    request, target = session.request, session.target
    name = request.name or (target.name if target else _remote_hostname(transport, timeout))
    addresses = sorted({transport.getpeername()[0], *([request.host] if is_ip(request.host) else [])})
    if target is not None:  # a re-pair is the same node: same id, a new name is a rename
        former = [n for n in target.former_names if n != name] + ([target.name] if target.name != name else [])
        identity = {"node_id": target.node_id, "former_names": former[-MAX_FORMER_NAMES:]}
    else:
        agent_id = _agent_node_id(transport, timeout, registry)
        identity = {"node_id": agent_id} if agent_id else {}
    try:
        return PairedNode(
            name=name,
            host=request.host,
            addresses=addresses,
            port=request.port,
            user=request.user,
            host_key=session.seen,
            **identity,
        )
    except ValidationError as exc:
        raise PairingError(
            f"Cannot record {request.host} as node {name!r} ({exc.errors()[0]['msg']}); nothing was "
            "changed. Give a name of letters, digits, '.', '_' or '-' with --name."
        ) from exc


def _agent_node_id(transport: paramiko.Transport, timeout: float, registry: Registry) -> str | None:
    """The node id of an agent already on the node (deployed earlier, or by another computer), if usable.

    Adopting it keeps one id per machine across the computers that pair it. An
    id another paired node has (a copied disk image) is not adopted: the node
    gets its host key's id, and deploy gives its agent that one.
    """
    from sparksync.core.deploy.layout import LAYOUT  # deploy builds on this package

    result = run(transport, ["cat", "--", LAYOUT.node_id], timeout)
    found = result.stdout.decode(errors="replace").strip() if result.exit_status == 0 else ""
    if not found:
        return None
    if not is_node_id(found):
        log.warning("the agent's node id on the node is not usable (%r); using its host key's", found[:80])
        return None
    taken = next((n.name for n in registry.list() if n.node_id == found), None)
    if taken is not None:
        log.warning("the agent's node id %s is already %s's; this node gets its host key's", found, taken)
        return None
    return found


def _remote_hostname(transport: paramiko.Transport, timeout: float) -> str:
    result = run(transport, ["uname", "-n"], timeout)
    name = result.stdout.decode(errors="replace").strip()
    if result.exit_status != 0 or not name:
        raise PairingError("The node did not tell its hostname (uname -n failed); give a name with --name.")
    return normalize_host(name).split(".", 1)[0]


def _record(registry: Registry, node: PairedNode, target: PairedNode | None) -> None:
    with registry.transaction():
        if target is not None:
            registry.remove(target.name)
        registry.add(node)


class _DryRun(Exception):
    """Raised inside a registry transaction to roll it back after its checks ran."""


class _ThisThreadOnly(logging.Filter):
    """Drops this thread's records: a dry run's "added node" lines would mislead."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread != self.thread


def _dry_run(registry: Registry, change: Callable[[Registry], None]) -> None:
    """Run ``change``'s checks (cluster full, name taken...) without saving anything."""
    quiet, registry_log = _ThisThreadOnly(), logging.getLogger(Registry.__module__)
    registry_log.addFilter(quiet)
    try:
        with registry.transaction():
            change(registry)
            raise _DryRun
    except _DryRun:
        pass
    finally:
        registry_log.removeFilter(quiet)


def _provisional(registry: Registry, session: _Session) -> PairedNode:
    """An entry good enough for the registry's checks before the node's hostname is known."""
    base = session.request.name or normalize_host(session.request.host).replace(":", "-")
    name, taken, suffix = base, set(registry.names()), 2
    while name in taken:  # a taken name would be reported instead of the full cluster
        name, suffix = f"{base}-{suffix}", suffix + 1
    return PairedNode(name=name, host=session.request.host, user=session.request.user, host_key=session.seen)


def _repair_target(registry: Registry, request: PairRequest) -> PairedNode | None:
    if request.name and request.name in registry:
        return registry.get(request.name)
    return next((node for node in registry.list() if _same_host(node, request.host)), None)


def _fingerprint_target(registry: Registry, request: PairRequest, seen: PinnedHostKey) -> PairedNode | None:
    if not request.repair:
        return None
    for node in registry.list():
        if node.host_key.fingerprint == seen.fingerprint:
            return node
    raise PairingError(
        f"--repair re-pairs a paired node, but none matches {request.host} (by name, address or host "
        "key). See `sparksync node list`; to add it as a new node, pair without --repair."
    )


def _same_host(node: PairedNode, host: str) -> bool:
    wanted = normalize_host(host)
    return wanted == normalize_host(node.host) or wanted in node.addresses


def _undo_install(transport: paramiko.Transport, client_key: ClientKey, where: str) -> None:
    try:
        uninstall_key(transport, client_key.public_line(), where)
        log.info("removed the key installed on %s again, since pairing failed", where)
    except Exception:  # the original error matters more; say what is left behind
        log.error(
            "pairing failed and this computer's key (%s) could not be removed from ~/.ssh/authorized_keys "
            "on %s; remove that line by hand",
            client_key.fingerprint(),
            where,
        )


@contextmanager
def _pairing_lock(directory: Path, key_fingerprint: str, host: str) -> Iterator[None]:
    digest = hashlib.sha256(key_fingerprint.encode()).hexdigest()[:16]
    path = ensure_dir(directory / "locks") / f"pair-{digest}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PairingBusyError(
                f"Another SparkSync on this computer is pairing {host} (host key {key_fingerprint}) right "
                "now; nothing was changed. Let it finish, then check with `sparksync node list`."
            ) from None
        yield
    finally:
        os.close(fd)  # releases the lock


def refresh_ssh_export(registry: Registry, client_key: ClientKey) -> None:
    """Rewrite the exported ssh config and known_hosts, if the user exported them before."""
    directory = registry.path.parent
    if (directory / CONFIG_FILE).exists():
        export_ssh_config(registry.list(), client_key.private_key_path, directory)


__all__ = [
    "ConfirmHostKey",
    "PairRequest",
    "PairResult",
    "PasswordSource",
    "pair_node",
    "refresh_ssh_export",
]
