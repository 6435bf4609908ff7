"""The advertised-host-key lookup pairing cross-checks with (the table only; mDNS itself is in the lab test)."""

from __future__ import annotations

import time

from sparksync.core.discovery import DiscoveredNode, Discovery
from sparksync.core.discovery.advertised import advertised_host_keys, matching_node
from sparksync.core.ssh.pairing import PairRequest, with_advertised_keys

FP = "SHA256:" + "B" * 43


def _node(hostname: str, addresses: list[str], fingerprints: dict[str, str]) -> DiscoveredNode:
    return DiscoveredNode(key=f"host:{hostname}", hostname=hostname, addresses=addresses, kind="agent",
                          host_key_fingerprints=fingerprints, sources=["sparksync"], last_seen=time.time())  # fmt: skip


def test_a_host_matches_by_address_or_by_its_mdns_name():
    nodes = [_node("spark-0002", ["10.0.0.2"], {}), _node("spark-0001", ["10.0.0.1"], {"ssh-ed25519": FP})]
    assert matching_node("10.0.0.1", ["10.0.0.1"], nodes) is nodes[1]
    assert matching_node("Spark-0001.local.", [], nodes) is nodes[1]
    assert matching_node("spark-0001.example.com", ["10.0.0.1"], nodes) is nodes[1]
    # A node that advertises no key has nothing to cross-check with.
    assert matching_node("10.0.0.2", ["10.0.0.2"], nodes) is None
    assert matching_node("10.0.0.9", ["10.0.0.9"], nodes) is None


def test_the_apps_discovery_table_is_used_without_browsing():
    discovery = Discovery(["127.0.0.1"])  # never started: only its table
    discovery.add(_node("spark-0001", ["10.0.0.1"], {"ssh-ed25519": FP}))

    assert advertised_host_keys("10.0.0.1", discovery=discovery, browse=False) == {"ssh-ed25519": FP}
    assert advertised_host_keys("10.0.0.7", discovery=discovery, browse=False) == {}
    assert advertised_host_keys("10.0.0.7", browse=False) == {}

    typed = with_advertised_keys(PairRequest("10.0.0.1", "me"), discovery=discovery, browse=False)
    assert typed.advertised_fingerprints == {"ssh-ed25519": FP}
    # A request from the discovered list keeps what it carries.
    own = PairRequest("10.0.0.1", "me", advertised_fingerprints={"ssh-ed25519": "SHA256:" + "C" * 43})
    assert with_advertised_keys(own, discovery=discovery, browse=False) is own
