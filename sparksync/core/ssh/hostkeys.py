"""Host keys: fingerprints, the pinned-key policy, and the mDNS cross-check.

Trust on first use, then never again without the user: pairing shows the
key's fingerprint and pins the key; every later connection must present
exactly that key. There is no code path that adds or replaces a pin by
itself (paramiko is never told to auto-add or merely warn); a changed key raises
``HostKeyChangedError`` naming both fingerprints and the re-pair command.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

import paramiko
from sparksync_agent.advertise import short_key_type

from sparksync.core.nodes.registry import PinnedHostKey, sha256_fingerprint
from sparksync.core.ssh.errors import HostKeyChangedError, HostKeyMismatchError

log = logging.getLogger(__name__)


def fingerprint(key: paramiko.PKey) -> str:
    """``SHA256:<base64, no padding>``, exactly as ``ssh-keygen -l`` prints it."""
    return sha256_fingerprint(key.asbytes())


def repair_command(host: str) -> str:
    return f"sparksync node pair {host} --repair"


def preferred_key_types(available: Iterable[str], first: Iterable[str]) -> list[str]:
    """``available`` host key algorithms, reordered so those presenting a ``first`` type lead.

    A server shows the key of the first algorithm we offer that it has, so
    putting the pinned (or advertised) type first makes it present the key we
    can check, instead of another key it also holds. Types compare in short
    form, so a pinned ``ssh-rsa`` key leads with ``rsa-sha2-512``.
    """
    wanted = {short_key_type(key_type) for key_type in first} - {""}
    algorithms = list(available)
    leading = [a for a in algorithms if short_key_type(a) in wanted]
    return leading + [a for a in algorithms if a not in leading]


class PinnedHostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Accept exactly the pinned key; raise HostKeyChangedError for anything else.

    Usable with ``paramiko.SSHClient`` (as its missing-host-key policy, with
    an empty known_hosts) and by our own transports through ``check``.
    """

    def __init__(self, pinned: PinnedHostKey, node_name: str, host: str):
        self.pinned = pinned
        self.node_name = node_name
        self.host = host

    def missing_host_key(self, client: object, hostname: str, key: paramiko.PKey) -> None:
        self.check(key)

    def check(self, key: paramiko.PKey) -> None:
        if self.pinned.matches(key):
            return
        log.warning(
            "host key of node %s changed: pinned %s, presented %s",
            self.node_name,
            self.pinned.fingerprint,
            fingerprint(key),
        )
        raise HostKeyChangedError(changed_key_message(self.node_name, self.host, self.pinned, key))


def changed_key_message(node_name: str, host: str, pinned: PinnedHostKey, key: paramiko.PKey) -> str:
    return (
        f"WARNING: the SSH host key of node {node_name!r} ({host}) has CHANGED. It was pinned at "
        f"pairing as {pinned.fingerprint} ({pinned.key_type}); the node now presents "
        f"{fingerprint(key)} ({key.get_name()}). This can be an impostor on your network, or the "
        "node was reinstalled. SparkSync stops every operation on this node and will not trust "
        "the new key by itself. Check the new fingerprint on the node's console "
        "(ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub); if it matches, re-pair with "
        f"`{repair_command(host)}`, or drop the node with `sparksync node unpair {node_name} --forget`."
    )


def cross_check_advertised(
    key: paramiko.PKey, advertised: Mapping[str, str], host: str, accept_mismatch: str | None = None
) -> bool:
    """Raise HostKeyMismatchError unless the key is among those the node advertised over mDNS.

    ``advertised`` maps key types (``ssh-ed25519`` or the short ``ed25519``)
    to ``SHA256:`` fingerprints; empty means nothing to check against (False
    is returned). ``accept_mismatch`` lets a mismatch through only when it
    names exactly the presented key's fingerprint: the user checked that key
    on the node itself and knows the advertisement is stale. True: matched.
    """
    usable = {short_key_type(k): v for k, v in advertised.items() if v.startswith("SHA256:")}
    if not usable:
        return False
    seen = fingerprint(key)
    if seen in usable.values():
        return True
    expected = ", ".join(f"{kind} {fp}" for kind, fp in sorted(usable.items()))
    if accept_mismatch is not None and accept_mismatch == seen:
        log.warning("%s presents %s, not the advertised %s; accepted as the user named it", host, seen, expected)
        return False
    raise HostKeyMismatchError(
        f"WARNING: possible impostor. {host} presents the host key {seen} ({key.get_name()}), but "
        f"the node advertised over mDNS {expected}. Pairing stopped; nothing was changed. Another "
        "machine may be answering for this address. Check the fingerprint on the node's console "
        "(ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub) before trying again. If the console "
        f"shows {seen} (its host keys were changed and the advertisement is stale), restart the "
        "agent there (systemctl --user restart sparksync-agent) so it advertises the new key, or "
        f"pair naming that key: --accept-advertised-mismatch {seen}."
    )
