"""A pairing request made from a discovered node carries what mDNS advertised."""

from __future__ import annotations

from sparksync.core.discovery.model import DiscoveredNode
from sparksync.core.ssh.pairing import PairRequest

FP = "SHA256:" + "Q" * 43


def discovered(hostname: str, addresses: list[str]) -> DiscoveredNode:
    return DiscoveredNode(
        key=f"fp:{FP}",
        hostname=hostname,
        addresses=addresses,
        ssh_port=2222,
        kind="agent",
        host_key_fingerprints={"ed25519": FP},
        last_seen=0.0,
    )


def test_a_named_node_is_paired_by_name_with_its_advertised_fingerprints():
    request = PairRequest.from_discovered(discovered("spark-1a2b.local", ["10.0.0.5"]), "nvidia")
    assert (request.host, request.port, request.user) == ("spark-1a2b.local", 2222, "nvidia")
    assert request.advertised_fingerprints == {"ed25519": FP} and request.name is None


def test_a_node_known_only_by_address_is_paired_by_its_first_address():
    request = PairRequest.from_discovered(discovered("10.0.0.7", ["10.0.0.7", "fe80::7"]), "u", name="n7")
    assert request.host == "10.0.0.7" and request.name == "n7"
