"""Fold what several sources say about one machine into one ``DiscoveredNode``.

Each thing heard is a ``Sighting``: one mDNS service, one typed host name or
one scan hit. Grouping follows how much each clue can be trusted:

1. Sightings that carry SSH host-key fingerprints (our agent's) are grouped
   by shared fingerprint: the same host key is the same machine, whatever its
   name or address.
2. Named sightings without one (Avahi's services, names typed by the user) are
   grouped by host name: an mDNS host name belongs to one machine on a link.
   Each such group joins the fingerprinted group with the same name, else the
   one it shares an address with (Avahi may have renamed the host
   "spark-1a2b-2" after a conflict).
3. Nameless sightings (scan hits, typed IP addresses) join the group they
   share an address with.

A clue that fits two machines joins neither, rather than merging strangers:
two names on one address (several hosts behind one address, or a stale
record) stay two entries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from sparksync.core.discovery.model import (
    DiscoveredNode,
    Kind,
    Source,
    is_ip,
    looks_like_spark,
    normalize_host,
    sort_addresses,
)
from sparksync_agent.advertise import fingerprints_from_txt

# Which source's name and SSH port win when sources disagree. The agent's
# advertisement comes first for identity; Avahi's _ssh service knows the real
# SSH port better than _workstation (which always says 9, "discard").
_NAME_ORDER: tuple[Source, ...] = ("sparksync", "ssh", "workstation", "manual", "scan")
_PORT_ORDER: tuple[Source, ...] = ("ssh", "sparksync", "manual", "scan")
_FINGERPRINT_ORDER = ("ed25519", "ecdsa", "rsa")


@dataclass(frozen=True)
class Sighting:
    """One thing heard about one machine."""

    source: Source
    names: tuple[str, ...]  # as heard, e.g. "spark-1a2b.local"; never an IP
    addresses: tuple[str, ...]
    seen: float
    port: int | None = None
    fingerprints: dict[str, str] = field(default_factory=dict)
    txt: dict[str, str] = field(default_factory=dict)  # our agent's TXT record, parsed
    banner: str | None = None

    @property
    def host_keys(self) -> set[str]:
        return {normalize_host(name) for name in self.names}


def sighting_from_agent_txt(
    txt: dict[str, str], server: str | None, addresses: list[str], port: int, seen: float
) -> Sighting:
    heard = (server.rstrip(".") if server else None, txt.get("hostname"))
    names = tuple(dict.fromkeys(name for name in heard if name and not is_ip(name)))
    return Sighting("sparksync", names, tuple(addresses), seen, port, fingerprints_from_txt(txt), dict(txt))


def sighting_from_node(node: DiscoveredNode, source: Source) -> Sighting:
    names = () if is_ip(node.hostname) else (node.hostname,)
    return Sighting(
        source, names, tuple(node.addresses), node.last_seen, node.ssh_port,
        dict(node.host_key_fingerprints), banner=node.ssh_banner,
    )  # fmt: skip


def merge_nodes(nodes: Iterable[DiscoveredNode], source: Source) -> list[DiscoveredNode]:
    """``nodes`` all heard through ``source`` (a scan's hits), one per machine, as ``merge`` sorts them."""
    return merge(sighting_from_node(node, source) for node in nodes)


def merge(sightings: Iterable[Sighting]) -> list[DiscoveredNode]:
    """One node per machine, sorted by kind (agents first) then host name."""
    nodes = [build_node(group) for group in group_sightings(list(sightings))]
    kind_rank = {"agent": 0, "spark": 1, "ssh": 2}
    return sorted(nodes, key=lambda n: (kind_rank[n.kind], normalize_host(n.hostname), n.key))


# --- grouping --------------------------------------------------------------------------


def group_sightings(sightings: list[Sighting]) -> list[list[Sighting]]:
    groups = _connected([s for s in sightings if s.fingerprints], _fingerprint_clues)
    named = _connected([s for s in sightings if not s.fingerprints and s.names], lambda s: s.host_keys)
    nameless = _connected([s for s in sightings if not s.fingerprints and not s.names], _address_clues)
    _attach(groups, named, [lambda s: s.host_keys, _address_clues])
    _attach(groups, nameless, [_address_clues])
    return groups


def _fingerprint_clues(sighting: Sighting) -> set[str]:
    return {f"{key_type}={value}" for key_type, value in sighting.fingerprints.items()}


def _address_clues(sighting: Sighting) -> set[str]:
    return set(sighting.addresses)


def _attach(
    groups: list[list[Sighting]],
    newcomers: list[list[Sighting]],
    clue_kinds: list[Callable[[Sighting], set[str]]],
) -> None:
    """Add each newcomer group to the one group its clues single out (tried in order), else on its own."""
    indexes = [_index(groups, clues) for clues in clue_kinds]
    for group in newcomers:
        target = None
        for index, clues in zip(indexes, clue_kinds, strict=True):
            target = _single_match(group, index, clues)
            if target is not None:
                break
        if target is None:
            groups.append(group)
        else:
            groups[target].extend(group)


def _connected(items: list[Sighting], clues: Callable[[Sighting], set[str]]) -> list[list[Sighting]]:
    """Groups of items linked, directly or through others, by a shared clue (union-find)."""
    parent = list(range(len(items)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_with: dict[str, int] = {}
    for i, item in enumerate(items):
        for clue in clues(item):
            parent[root(i)] = root(first_with.setdefault(clue, i))
    groups: dict[int, list[Sighting]] = {}
    for i, item in enumerate(items):
        groups.setdefault(root(i), []).append(item)
    return list(groups.values())


def _index(groups: list[list[Sighting]], clues: Callable[[Sighting], set[str]]) -> dict[str, set[int]]:
    index: dict[str, set[int]] = {}
    for number, group in enumerate(groups):
        for sighting in group:
            for clue in clues(sighting):
                index.setdefault(clue, set()).add(number)
    return index


def _single_match(
    group: list[Sighting], index: dict[str, set[int]], clues: Callable[[Sighting], set[str]]
) -> int | None:
    matches = {number for s in group for clue in clues(s) for number in index.get(clue, ())}
    return matches.pop() if len(matches) == 1 else None


# --- building the node ---------------------------------------------------------------


def build_node(group: list[Sighting]) -> DiscoveredNode:
    ordered = sorted(group, key=lambda s: _NAME_ORDER.index(s.source))
    fingerprints = _fingerprints(ordered)
    addresses = sort_addresses({a for s in group for a in s.addresses})
    hostname = next((name for s in ordered for name in s.names), addresses[0] if addresses else "?")
    agent = next((s for s in ordered if s.source == "sparksync"), None)
    txt = agent.txt if agent else {}
    spark = any(looks_like_spark(name) for s in group for name in s.names)
    return DiscoveredNode(
        key=_key(fingerprints, hostname, addresses),
        hostname=hostname,
        addresses=addresses,
        ssh_port=_ssh_port(group),
        kind=_kind(agent is not None, spark),
        likely_spark=spark,
        node_id=txt.get("node_id") or None,
        agent_version=txt.get("agent_version") or None,
        protocol_version=txt.get("protocol") or None,
        mem_total_bytes=_int_or_none(txt.get("mem_total")),
        arch=txt.get("arch") or None,
        host_key_fingerprints=fingerprints,
        sources=sorted({s.source for s in group}, key=_NAME_ORDER.index),
        ssh_banner=next((s.banner for s in ordered if s.banner), None),
        last_seen=max(s.seen for s in group),
    )


def _fingerprints(ordered: list[Sighting]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for sighting in ordered:
        for key_type, value in sighting.fingerprints.items():
            merged.setdefault(key_type, value)
    return merged


def _key(fingerprints: dict[str, str], hostname: str, addresses: list[str]) -> str:
    if fingerprints:
        rank = {key_type: i for i, key_type in enumerate(_FINGERPRINT_ORDER)}
        best = min(fingerprints, key=lambda t: (rank.get(t, len(rank)), t))
        return f"fp:{fingerprints[best]}"
    if not is_ip(hostname):
        return f"host:{normalize_host(hostname)}"
    return f"addr:{addresses[0] if addresses else hostname}"


def _ssh_port(group: list[Sighting]) -> int:
    ports = {s.source: s.port for s in group if s.port}
    return next((ports[source] for source in _PORT_ORDER if source in ports), 22)


def _kind(has_agent: bool, spark: bool) -> Kind:
    if has_agent:
        return "agent"
    return "spark" if spark else "ssh"


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None
