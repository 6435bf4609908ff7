"""What a host advertises about its own SSH host keys, for pairing's cross-check.

Our agent publishes its node's host-key fingerprints in its
``_sparksync._tcp`` record. Pairing compares the key the host presents with
them, so a machine answering for a node's address with another key is
caught before the user is asked to trust it. Both faces use this one lookup,
whether the node was picked from the discovered list or its host was typed:

- the host (a name or an address) is matched against what a running
  ``Discovery`` has seen (the app's), by name or by any of its addresses;
- otherwise, or when nothing matches yet, discovery waits up to ``wait_s``
  for it: on the running ``Discovery`` (the app's), or on one opened just
  for this on ``interfaces`` (the CLI's).

Finding nothing is not an error: a node without our agent advertises no
fingerprint, and mDNS may be blocked. Then pairing relies on the user's
confirmation alone, and says so.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.discovery.browse import Discovery
from sparksync.core.discovery.manual import resolve_host
from sparksync.core.discovery.model import DiscoveredNode, is_ip, normalize_host

log = logging.getLogger(__name__)

ADVERTISED_WAIT_S = 2.0  # an advertised record resolves in 0.03-0.11 s; a cold browse takes ~1 s


def matching_node(host: str, addresses: Iterable[str], nodes: Iterable[DiscoveredNode]) -> DiscoveredNode | None:
    """The discovered node that advertises host keys and is ``host`` (by name or address)."""
    wanted_name = None if is_ip(host) else normalize_host(host)
    wanted_addresses = set(addresses) | ({host} if is_ip(host) else set())
    for node in nodes:
        if not node.host_key_fingerprints:
            continue
        if wanted_name is not None and normalize_host(node.hostname) == wanted_name:
            return node
        if wanted_addresses & set(node.addresses):
            return node
    return None


def advertised_host_keys(
    host: str,
    port: int = 22,
    *,
    discovery: Discovery | None = None,
    interfaces: list[str] | None = None,
    wait_s: float = ADVERTISED_WAIT_S,
    browse: bool = True,
) -> dict[str, str]:
    """The host-key fingerprints ``host`` advertises over mDNS (key type -> ``SHA256:...``), or {}.

    ``browse=False``: never open a Discovery of its own (the app's faces use
    theirs, and none when the user turned discovery off).
    """
    addresses = _addresses(host, port)
    if discovery is not None:
        found = matching_node(host, addresses, discovery.nodes())
        if found is not None:
            return dict(found.host_key_fingerprints)
    own = None
    try:
        if discovery is None or not discovery.running:
            if not browse:
                return {}
            own = discovery = Discovery(interfaces).start()
        matched: list[DiscoveredNode] = []

        def seen(nodes: list[DiscoveredNode]) -> bool:
            node = matching_node(host, addresses, nodes)
            if node is not None:
                matched.append(node)
            return node is not None

        discovery.wait_until(seen, wait_s)
    except SparkSyncError as exc:  # no interface to browse on, mDNS blocked: nothing to compare with
        log.info("no mDNS lookup of %s's advertised host keys: %s", host, exc)
        return {}
    finally:
        if own is not None:
            own.stop()
    return dict(matched[-1].host_key_fingerprints) if matched else {}


def _addresses(host: str, port: int) -> list[str]:
    """The addresses to match ``host`` by. A ``.local`` name is matched by name (no extra mDNS query)."""
    if is_ip(host):
        return [host]
    if normalize_host(host) != host.strip().lower().rstrip("."):
        return []
    try:
        return list(resolve_host(host, port).addresses)
    except SparkSyncError:  # pairing will say so when it dials; the name may still match
        return []
