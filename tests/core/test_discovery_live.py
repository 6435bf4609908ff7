"""Discovery against real mDNS on loopback: a publisher with its own zeroconf plays the other machines.

Other tests on this machine may publish on loopback at the same time, so
each test looks only at the host names and addresses it made.
"""

from __future__ import annotations

import threading
import time

import pytest

from sparksync.core.discovery import DiscoveredNode, Discovery, InterfaceError, resolve_host
from sparksync.core.discovery.model import normalize_host
from tests.core.mdns_publisher import (
    Publisher,
    agent_info,
    fingerprint,
    ssh_service,
    doc_address,
    unique_host,
    workstation_service,
)

WAIT_S = 8.0  # generous: an answer can be held back up to 1 s by mDNS rate limits


@pytest.fixture
def publisher():
    pub = Publisher("127.0.0.1")
    yield pub
    pub.close()


@pytest.fixture
def discovery():
    found = Discovery(["127.0.0.1"])
    yield found
    found.stop()


class Recorder:
    """A listener that keeps every event."""

    def __init__(self) -> None:
        self.events: list[tuple[str, DiscoveredNode]] = []
        self.lock = threading.Lock()

    def __call__(self, event: str, node: DiscoveredNode) -> None:
        with self.lock:
            self.events.append((event, node))

    def for_host(self, host: str) -> list[tuple[str, DiscoveredNode]]:
        with self.lock:
            return [(e, n) for e, n in self.events if normalize_host(n.hostname) == host]


def named(nodes: list[DiscoveredNode], host: str) -> DiscoveredNode | None:
    return next((n for n in nodes if normalize_host(n.hostname) == host), None)


def wait_for(discovery: Discovery, host: str, check=lambda n: True) -> DiscoveredNode:
    assert discovery.wait_until(lambda ns: (n := named(ns, host)) is not None and check(n), WAIT_S), (
        f"{host} not found as expected; saw {[n.model_dump() for n in discovery.nodes()]}"
    )
    return named(discovery.nodes(), host)


def test_finds_agent_bare_spark_and_plain_ssh_host(publisher, discovery):
    agent_host, spark_host, plain_host = unique_host("spark"), unique_host("spark"), unique_host("buildbox")
    fp = fingerprint()
    publisher.advertise_agent(agent_info(agent_host, {"ssh-ed25519": fp}), ssh_port=2222)
    publisher.register(ssh_service(spark_host, [doc_address()]), ssh_service(plain_host, [doc_address()]))
    discovery.start()

    agent = wait_for(discovery, agent_host)
    spark = wait_for(discovery, spark_host)
    plain = wait_for(discovery, plain_host)
    assert (agent.kind, spark.kind, plain.kind) == ("agent", "spark", "ssh")
    assert agent.key == f"fp:{fp}" and agent.host_key_fingerprints == {"ed25519": fp}
    assert agent.addresses == ["127.0.0.1"] and agent.ssh_port == 2222
    assert agent.arch == "aarch64" and agent.mem_total_bytes == 128 * 10**9 and agent.node_id
    assert spark.likely_spark and not plain.likely_spark
    assert spark.sources == plain.sources == ["ssh"]


def test_agent_and_avahi_services_of_one_host_are_one_entry(publisher, discovery):
    host, fp = unique_host("spark"), fingerprint()
    publisher.advertise_agent(agent_info(host, {"ssh-ed25519": fp}))
    publisher.register(ssh_service(host, ["127.0.0.1"]), workstation_service(host, ["127.0.0.1"]))
    discovery.start()

    node = wait_for(discovery, host, lambda n: len(n.sources) == 3)
    assert node.kind == "agent" and node.key == f"fp:{fp}"
    assert node.sources == ["sparksync", "ssh", "workstation"]
    assert [n for n in discovery.nodes() if normalize_host(n.hostname) == host] == [node]


def test_host_with_two_interfaces_is_one_entry_with_both_addresses(publisher, discovery):
    host = unique_host("gx10")
    first, second = "203.0.113.10", "198.51.100.10"
    publisher.register(ssh_service(host, [first, second]), workstation_service(host, [second]))
    discovery.start()

    node = wait_for(discovery, host, lambda n: len(n.sources) == 2)
    assert node.addresses == [second, first] and node.kind == "spark"  # numeric order
    assert sum(1 for n in discovery.nodes() if first in n.addresses or second in n.addresses) == 1


def test_nodes_appear_and_disappear_live(publisher, discovery):
    host = unique_host("spark")
    ssh_info, ws_info = ssh_service(host, [doc_address()]), workstation_service(host, [doc_address()])
    recorder = Recorder()
    discovery.add_listener(recorder)
    discovery.start()
    publisher.register(ssh_info, ws_info)  # after start: found live, not only at start
    wait_for(discovery, host, lambda n: len(n.sources) == 2)

    publisher.unregister(ws_info)
    node = wait_for(discovery, host, lambda n: n.sources == ["ssh"])  # one service left: still there
    assert node.kind == "spark"
    publisher.unregister(ssh_info)  # its last service: the node goes
    assert discovery.wait_until(lambda ns: named(ns, host) is None, WAIT_S)

    events = [event for event, _ in recorder.for_host(host)]
    assert events[0] == "added" and events[-1] == "removed"
    assert events.count("added") == 1 and events.count("removed") == 1 and "updated" in events


def test_goodbye_of_the_agent_leaves_the_bare_host(publisher, discovery):
    host, fp = unique_host("spark"), fingerprint()
    advertiser = publisher.advertise_agent(agent_info(host, {"ssh-ed25519": fp}))
    publisher.register(ssh_service(host, ["127.0.0.1"]))
    recorder = Recorder()
    discovery.add_listener(recorder)
    discovery.start()
    wait_for(discovery, host, lambda n: n.kind == "agent" and "ssh" in n.sources)

    publisher.stop_agent(advertiser)
    node = wait_for(discovery, host, lambda n: n.kind == "spark")
    assert node.key == f"host:{host}" and node.host_key_fingerprints == {}
    # The key changed with the fingerprint gone: the old entry is reported removed, the new one added.
    assert ("removed", f"fp:{fp}") in [(e, n.key) for e, n in recorder.for_host(host)]


def test_node_expires_when_its_records_time_out_without_goodbye(publisher):
    quiet, alive = unique_host("quiet"), unique_host("alive")
    quiet_info, alive_info = ssh_service(quiet, [doc_address()]), ssh_service(alive, [doc_address()])
    for info in (quiet_info, alive_info):
        info.host_ttl = 2  # SRV and address records; a real host uses 120 s
    publisher.register(quiet_info, alive_info)
    recorder = Recorder()
    discovery = Discovery(["127.0.0.1"], resolve_timeout_s=1.0, refresh_interval_s=0.5)
    discovery.add_listener(recorder)
    with discovery:
        wait_for(discovery, quiet)
        wait_for(discovery, alive)
        publisher.vanish(quiet_info)  # no goodbye: the host just goes quiet, as when it loses power
        assert discovery.wait_until(lambda ns: named(ns, quiet) is None, 10)
        assert named(discovery.nodes(), alive) is not None  # its records expired too, but it answered
    assert [e for e, _ in recorder.for_host(quiet)] == ["added", "removed"]
    assert [e for e, _ in recorder.for_host(alive)] == ["added"]  # refreshes that change nothing are not news


def test_manual_add_merges_with_what_mdns_says_and_stays(publisher, discovery):
    host = unique_host("spark")
    address = doc_address()
    publisher.register(ssh_service(host, [address]))
    discovery.start()
    wait_for(discovery, host)

    merged = discovery.add_host(address)
    assert normalize_host(merged.hostname) == host and merged.sources == ["ssh", "manual"]
    discovery.add_host("127.0.0.1", port=2200)
    assert any("manual" in n.sources and "127.0.0.1" in n.addresses for n in discovery.nodes())
    discovery.forget("addr:127.0.0.1")
    assert not any("manual" in n.sources and "127.0.0.1" in n.addresses for n in discovery.nodes())
    assert "manual" in named(discovery.nodes(), host).sources  # the other manual entry stays


def test_add_host_resolves_a_local_name_over_mdns(publisher, discovery):
    host, address = unique_host("spark"), doc_address()
    publisher.register(ssh_service(host, [address]))
    discovery.start()
    node = discovery.add_host(f"{host}.local")
    assert address in node.addresses and normalize_host(node.hostname) == host and node.likely_spark


def test_a_broken_listener_does_not_stop_the_others(publisher, discovery):
    host = unique_host("box")
    recorder = Recorder()

    def broken(event, node):
        raise RuntimeError("listener bug")

    discovery.add_listener(broken)
    unsubscribe = discovery.add_listener(recorder)
    publisher.register(ssh_service(host, [doc_address()]))
    discovery.start()
    wait_for(discovery, host)
    assert recorder.for_host(host)[0][0] == "added"
    node = wait_for(discovery, host)
    discovery.add(node.model_copy(update={"ssh_port": 2222}))  # adds "manual" to its sources
    assert recorder.for_host(host)[-1][0] == "updated"
    unsubscribe()
    seen = len(recorder.events)
    discovery.forget(node.key)
    assert named(discovery.nodes(), host).sources == ["ssh"] and len(recorder.events) == seen


def test_stop_closes_everything_keeps_the_table_and_can_restart(publisher):
    host = unique_host("box")
    publisher.register(ssh_service(host, [doc_address()]))
    threads = set(threading.enumerate())
    discovery = Discovery(["127.0.0.1"]).start()
    try:
        assert discovery.running and discovery.start() is discovery  # a second start is a no-op
        wait_for(discovery, host)
    finally:
        discovery.stop()
    discovery.stop()
    assert not discovery.running
    assert named(discovery.nodes(), host) is not None
    deadline = time.monotonic() + 3
    while set(threading.enumerate()) - threads and time.monotonic() < deadline:
        threading.Event().wait(0.05)
    assert set(threading.enumerate()) - threads == set()
    with discovery:
        assert discovery.running
    assert not discovery.running


def test_cold_start_discovery_finds_eight_services(publisher):
    """A fresh Discovery finds services already on the network (the perf bench times it)."""
    hosts = [unique_host("spark") for _ in range(8)]
    publisher.register(*[ssh_service(host, [doc_address()]) for host in hosts])
    time.sleep(1.1)  # RFC 6762 lets a responder re-multicast a record only once a second
    with Discovery(["127.0.0.1"]) as discovery:
        assert discovery.wait_until(lambda ns: all(named(ns, h) for h in hosts), WAIT_S)


@pytest.mark.parametrize(
    ("interfaces", "message"),
    [
        ([], "no interface address given"),
        (["not-an-ip"], "not an IP address"),
        (["::1"], "IPv6"),
        (["0.0.0.0"], "not an interface address"),
        (["224.0.0.251"], "not an interface address"),
        (["203.0.113.77"], r"no interface of this machine.*127\.0\.0\.1"),
    ],
)
def test_bad_interfaces_are_refused_before_anything_opens(interfaces, message):
    with pytest.raises(InterfaceError, match=message):
        Discovery(interfaces)


def test_default_interfaces_are_this_machines_own_non_loopback_ipv4():
    from sparksync.core.discovery import default_interfaces
    from sparksync.core.discovery.interfaces import check_interfaces

    try:
        found = default_interfaces()
    except InterfaceError as exc:
        assert "no network interface" in str(exc)
        return
    assert found and all(not a.startswith("127.") and ":" not in a for a in found)
    assert check_interfaces(found) == found  # every one is a real local address


def test_manual_and_scan_entries_for_one_address_keep_both_sources():
    discovery = Discovery(["127.0.0.1"])  # never started: the table works without mDNS
    manual = resolve_host("203.0.113.44")
    discovery.add(manual)
    discovery.add(manual.model_copy(update={"ssh_banner": "SSH-2.0-x"}), "scan")
    (node,) = discovery.nodes()
    assert node.sources == ["manual", "scan"] and node.ssh_banner == "SSH-2.0-x"
    discovery.forget(node.key)
    assert discovery.nodes() == []
