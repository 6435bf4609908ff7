"""Discovery's pure parts: host-name rules and how sightings merge into one node per machine."""

from __future__ import annotations

import pytest
from zeroconf import ServiceInfo

from sparksync.core.discovery.browse import sighting_from_info, sighting_from_node
from sparksync.core.discovery.merge import Sighting, build_node, merge, sighting_from_agent_txt
from sparksync.core.discovery.model import DiscoveredNode, looks_like_spark, normalize_host, sort_addresses
from sparksync_agent.advertise import txt_record
from tests.core.mdns_publisher import MEM, agent_info

FP_A = "SHA256:" + "A" * 43
FP_B = "SHA256:" + "B" * 43
FP_RSA = "SHA256:" + "R" * 43


def agent(host: str, addresses: list[str], fp: str = FP_A, seen: float = 10.0, port: int = 22) -> Sighting:
    txt = txt_record(agent_info(host, {"ssh-ed25519": fp}), MEM)
    return sighting_from_agent_txt(txt, f"{host}.local.", addresses, port, seen)


def ssh(
    host: str | None, addresses: list[str], source: str = "ssh", port: int | None = 22, seen: float = 5.0
):
    return Sighting(source, (f"{host}.local",) if host else (), tuple(addresses), seen, port)


@pytest.mark.parametrize(
    ("name", "spark"),
    [
        ("spark-1a2b", True),
        ("spark-1a2b.local", True),
        ("SPARK-1A2B.local.", True),
        ("gx10-9f3e", True),
        ("gx10-9f3e.local", True),
        ("spark-12", False),  # too short to be a factory suffix
        ("sparky-1a2b", False),
        ("my-spark-1a2b", False),
        ("build-box", False),
        ("spark-1a2b.example.com", True),
        ("", False),
    ],
)
def test_spark_hostname_patterns(name, spark):
    assert looks_like_spark(name) is spark


def test_normalize_host_folds_case_trailing_dot_and_local_only():
    assert normalize_host("Spark-1A2B.local.") == normalize_host("spark-1a2b") == "spark-1a2b"
    assert normalize_host("node3.lab.example.com.") == "node3.lab.example.com"


def test_sort_addresses_is_numeric_v4_first():
    assert sort_addresses({"10.0.0.10", "fe80::1", "10.0.0.9"}) == ["10.0.0.9", "10.0.0.10", "fe80::1"]


def test_agent_sighting_becomes_an_agent_node_with_its_txt_fields():
    (node,) = merge([agent("spark-1a2b", ["10.0.0.5"], port=2222)])
    assert node.kind == "agent" and node.likely_spark
    assert node.key == f"fp:{FP_A}"
    assert node.hostname == "spark-1a2b.local"
    assert node.host_key_fingerprints == {"ed25519": FP_A}
    assert node.mem_total_bytes == MEM and node.arch == "aarch64"
    assert node.agent_version and node.protocol_version and node.node_id
    assert node.ssh_port == 2222 and node.sources == ["sparksync"]


def test_kinds_of_hosts_without_agent():
    nodes = {n.hostname: n for n in merge([ssh("spark-1a2b", ["10.0.0.5"]), ssh("build-box", ["10.0.0.6"])])}
    assert nodes["spark-1a2b.local"].kind == "spark" and nodes["spark-1a2b.local"].likely_spark
    assert nodes["build-box.local"].kind == "ssh" and not nodes["build-box.local"].likely_spark
    assert nodes["build-box.local"].key == "host:build-box"


def test_agent_and_avahi_services_of_one_host_merge_by_name():
    sightings = [
        agent("spark-1a2b", ["10.0.0.5"], seen=10.0),
        ssh("spark-1a2b", ["10.0.0.5"], seen=11.0),
        ssh("spark-1a2b", ["10.0.0.5", "10.0.1.5"], source="workstation", port=9),
    ]
    (node,) = merge(sightings)
    assert node.kind == "agent" and node.key == f"fp:{FP_A}"
    assert node.sources == ["sparksync", "ssh", "workstation"]
    assert node.addresses == ["10.0.0.5", "10.0.1.5"]  # every interface of the node
    assert node.ssh_port == 22  # _workstation's port 9 is not SSH
    assert node.last_seen == 11.0


def test_agent_and_nameless_sighting_merge_by_address():
    (node,) = merge([agent("spark-1a2b", ["10.0.0.5"]), ssh(None, ["10.0.0.5"], source="scan")])
    assert node.kind == "agent" and node.sources == ["sparksync", "scan"]


def test_same_fingerprint_is_one_machine_whatever_the_names_and_addresses():
    (node,) = merge([agent("spark-1a2b", ["10.0.0.5"]), agent("renamed", ["192.168.7.7"])])
    assert node.addresses == ["10.0.0.5", "192.168.7.7"]


def test_different_fingerprints_never_merge_even_on_one_address():
    nodes = merge([agent("a", ["10.0.0.5"], FP_A), agent("b", ["10.0.0.5"], FP_B)])
    assert sorted(n.key for n in nodes) == sorted([f"fp:{FP_A}", f"fp:{FP_B}"])


def test_an_ambiguous_clue_joins_neither_machine():
    """A nameless sighting at an address two different host keys claim joins neither."""
    nodes = merge([agent("a", ["10.0.0.5"], FP_A), agent("b", ["10.0.0.5"], FP_B), ssh(None, ["10.0.0.5"])])
    assert len(nodes) == 3
    loose = next(n for n in nodes if not n.host_key_fingerprints)
    assert loose.key == "addr:10.0.0.5" and loose.hostname == "10.0.0.5" and loose.kind == "ssh"


def test_name_beats_address_when_addresses_are_ambiguous():
    sightings = [agent("a", ["10.0.0.5"], FP_A), agent("b", ["10.0.0.5"], FP_B), ssh("a", ["10.0.0.5"])]
    by_key = {n.key: n for n in merge(sightings)}
    assert by_key[f"fp:{FP_A}"].sources == ["sparksync", "ssh"]
    assert by_key[f"fp:{FP_B}"].sources == ["sparksync"]


def test_loose_sightings_chain_through_shared_clues():
    sightings = [
        ssh("box", ["10.0.0.7"]),
        ssh(None, ["10.0.0.7"], source="scan"),
        ssh("box", ["10.0.1.7"], "workstation"),
    ]
    (node,) = merge(sightings)
    assert node.addresses == ["10.0.0.7", "10.0.1.7"] and node.sources == ["ssh", "workstation", "scan"]


def test_key_prefers_ed25519_then_ecdsa_then_rsa():
    sighting = Sighting("sparksync", ("h",), ("10.0.0.1",), 1.0, 22, {"rsa": FP_RSA, "ecdsa": FP_B})
    assert build_node([sighting]).key == f"fp:{FP_B}"


def test_merge_orders_agents_then_sparks_then_ssh():
    nodes = merge(
        [ssh("zeta", ["10.0.0.9"]), ssh("spark-bbbb", ["10.0.0.8"]), agent("spark-aaaa", ["10.0.0.7"])]
    )
    assert [n.kind for n in nodes] == ["agent", "spark", "ssh"]


def test_bad_mem_total_from_the_network_is_dropped_not_fatal():
    txt = txt_record(agent_info("spark-1a2b", {"ssh-ed25519": FP_A}), MEM) | {"mem_total": "lots"}
    (node,) = merge([sighting_from_agent_txt(txt, None, ["10.0.0.5"], 22, 1.0)])
    assert node.mem_total_bytes is None and node.hostname == "spark-1a2b"


def test_sighting_from_resolved_zeroconf_info():
    info = ServiceInfo("_ssh._tcp.local.", "box._ssh._tcp.local.", port=2200, server="box.local.",
                       parsed_addresses=["10.0.0.3", "10.0.0.4"])  # fmt: skip
    sighting = sighting_from_info("ssh", info, 3.0)
    assert sighting.names == ("box.local",) and sighting.addresses == ("10.0.0.3", "10.0.0.4")
    assert sighting.port == 2200
    assert sighting_from_info("workstation", info, 3.0).port is None


def test_node_round_trips_through_a_sighting():
    node = build_node([agent("spark-1a2b", ["10.0.0.5"])])
    again = build_node([sighting_from_node(node, "manual")])
    assert again.key == node.key and again.addresses == node.addresses and again.sources == ["manual"]


def test_discovered_node_json_round_trip():
    node = build_node([agent("spark-1a2b", ["10.0.0.5"])])
    assert DiscoveredNode.model_validate_json(node.model_dump_json()) == node


def test_two_names_on_one_address_stay_two_entries():
    """Hosts behind one address (or a stale record) are not glued together by the address alone."""
    nodes = merge(
        [ssh("alpha", ["10.0.0.5"]), ssh("beta", ["10.0.0.5"]), ssh(None, ["10.0.0.5"], source="scan")]
    )
    assert sorted(n.key for n in nodes) == ["addr:10.0.0.5", "host:alpha", "host:beta"]


def test_a_crowded_address_does_not_keep_a_service_from_its_own_agent():
    sightings = [
        agent("spark-1a2b", ["127.0.0.1"], FP_A),
        agent("other", ["127.0.0.1"], FP_B),
        ssh("other", ["127.0.0.1"]),
        ssh("spark-1a2b", ["127.0.0.1"]),
    ]
    by_key = {n.key: n for n in merge(sightings)}
    assert len(by_key) == 2
    assert by_key[f"fp:{FP_A}"].sources == by_key[f"fp:{FP_B}"].sources == ["sparksync", "ssh"]


def test_avahi_renamed_host_joins_its_agent_by_address():
    (node,) = merge([agent("spark-1a2b", ["10.0.0.5"]), ssh("spark-1a2b-2", ["10.0.0.5"])])
    assert node.kind == "agent" and node.sources == ["sparksync", "ssh"]
