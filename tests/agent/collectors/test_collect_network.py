from __future__ import annotations

import pytest

from sparksync_agent.collectors.network import NetworkCollector, classify_interface
from sparksync_agent.protocol import InterfaceKind


class Addresses:
    """An address source that counts its calls (the real one dumps netlink)."""

    def __init__(self, table=None):
        self.table = table or {}
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return self.table


def by_name(samples):
    return {s.name: s for s in samples}


@pytest.fixture
def addresses():
    return Addresses({"enp1s0f0np0": ["192.168.100.1"]})


@pytest.fixture
def collector(tree, addresses):
    tree.interface("lo", speed=None, mtu=65536, operstate="unknown", flags="0x9", virtual=True)
    tree.interface("enp1s0f0np0", speed="200000", mtu=9000)
    return NetworkCollector(tree.proc, tree.sys, addresses=addresses)


def test_first_sample_has_zero_rates_and_cumulative_errors(tree, collector):
    tree.net_dev({"lo": {"rx_bytes": 500}, "enp1s0f0np0": {"rx_bytes": 10**9, "rx_errs": 3, "tx_drop": 2}})
    fabric = by_name(collector.sample(100.0))["enp1s0f0np0"]
    assert (fabric.rx_bytes_per_s, fabric.tx_bytes_per_s, fabric.rx_packets_per_s) == (0.0, 0.0, 0.0)
    assert (fabric.rx_errors, fabric.tx_drops) == (3, 2)


def test_rates_between_two_samples(tree, collector):
    start = {"rx_bytes": 1_000, "rx_packets": 10, "tx_bytes": 5_000, "tx_packets": 50}
    tree.net_dev({"enp1s0f0np0": start})
    collector.sample(100.0)
    tree.net_dev(
        {
            "enp1s0f0np0": {
                "rx_bytes": 26_000,
                "rx_packets": 35,
                "tx_bytes": 5_500,
                "tx_packets": 55,
                "rx_errs": 1,
            }
        }
    )
    fabric = by_name(collector.sample(100.5))["enp1s0f0np0"]
    assert fabric.rx_bytes_per_s == 50_000.0
    assert fabric.tx_bytes_per_s == 1_000.0
    assert fabric.rx_packets_per_s == 50.0
    assert fabric.tx_packets_per_s == 10.0
    assert fabric.rx_errors == 1


def test_counter_going_back_is_a_reset_never_negative(tree, collector):
    tree.net_dev({"enp1s0f0np0": {"rx_bytes": 2**40, "tx_bytes": 3_000}})
    collector.sample(0.0)
    tree.net_dev({"enp1s0f0np0": {"rx_bytes": 4_000, "tx_bytes": 100}})
    fabric = by_name(collector.sample(2.0))["enp1s0f0np0"]
    assert fabric.rx_bytes_per_s == 2_000.0  # counted from 0 after the reset
    assert fabric.tx_bytes_per_s == 50.0  # not a 2**32 wrap: that would be ~2 GB/s


def test_link_attributes(tree, collector):
    tree.interface("eth1", speed="-1", operstate="down", flags="0x1002")
    tree.interface("wlP9s9", speed=None)  # wireless drivers often have no speed file
    tree.net_dev({"lo": {}, "enp1s0f0np0": {}, "eth1": {}, "wlP9s9": {}})
    links = by_name(collector.sample(0.0))
    assert (links["lo"].kind, links["lo"].is_up, links["lo"].speed_mbps) == (
        InterfaceKind.loopback,
        True,
        None,
    )
    fabric = links["enp1s0f0np0"]
    assert (fabric.kind, fabric.is_up, fabric.speed_mbps, fabric.mtu) == (
        InterfaceKind.fabric,
        True,
        200000,
        9000,
    )
    assert fabric.addresses == ["192.168.100.1"]
    assert (links["eth1"].is_up, links["eth1"].speed_mbps) == (False, None)
    assert links["wlP9s9"].speed_mbps is None and links["wlP9s9"].kind == InterfaceKind.management


def test_interface_without_sysfs_entry_still_counts(tree, collector):
    tree.net_dev({"ghost0": {"rx_bytes": 1}})
    ghost = by_name(collector.sample(0.0))["ghost0"]
    assert (ghost.is_up, ghost.mtu, ghost.speed_mbps, ghost.kind) == (False, None, None, InterfaceKind.other)


def test_link_attributes_refresh_at_most_every_interval(tree, collector, addresses):
    tree.net_dev({"lo": {}, "enp1s0f0np0": {}})
    collector.sample(0.0)
    tree.interface("enp1s0f0np0", speed="200000", mtu=1500, operstate="down")
    for step in range(1, 50):  # 10 Hz for 4.9 s
        collector.sample(step / 10)
    stale = by_name(collector.sample(4.95))["enp1s0f0np0"]
    assert (stale.mtu, stale.is_up, addresses.calls) == (9000, True, 1)
    fresh = by_name(collector.sample(5.0))["enp1s0f0np0"]
    assert (fresh.mtu, fresh.is_up, addresses.calls) == (1500, False, 2)


def test_new_interface_is_described_at_once(tree, collector):
    tree.net_dev({"lo": {}})
    collector.sample(0.0)
    tree.interface("veth1a2b", virtual=True)
    tree.net_dev({"lo": {}, "veth1a2b": {"rx_bytes": 7}})
    veth = by_name(collector.sample(0.1))["veth1a2b"]
    assert (veth.kind, veth.mtu, veth.rx_bytes_per_s) == (InterfaceKind.virtual, 1500, 0.0)


def test_failing_address_source_does_not_stop_counters(tree):
    def broken():
        raise OSError("netlink says no")

    tree.net_dev({"lo": {"rx_bytes": 1}})
    samples = NetworkCollector(tree.proc, tree.sys, addresses=broken).sample(0.0)
    assert [(s.name, s.addresses) for s in samples] == [("lo", [])]


def test_vanished_net_dev_raises(tree, collector):
    with pytest.raises(FileNotFoundError):
        collector.sample(0.0)


@pytest.mark.parametrize(
    ("name", "in_virtual_sysfs", "kind"),
    [
        ("lo", True, InterfaceKind.loopback),
        ("enp1s0f0np0", False, InterfaceKind.fabric),
        ("enp1s0f1np1", False, InterfaceKind.fabric),
        ("enP2p1s0f0np0", False, InterfaceKind.fabric),
        ("enP2p1s0f1np1", False, InterfaceKind.fabric),
        ("enP7s7", False, InterfaceKind.management),
        ("wlP9s9", False, InterfaceKind.management),
        ("eth0", False, InterfaceKind.management),
        ("eth0", True, InterfaceKind.management),  # the lab's veth renamed eth0 in a namespace
        ("eno1", False, InterfaceKind.management),
        ("wwan0", False, InterfaceKind.management),
        ("veth1a2b3c", True, InterfaceKind.virtual),
        ("docker0", True, InterfaceKind.virtual),
        ("br-0123abcd", True, InterfaceKind.virtual),
        ("virbr0", True, InterfaceKind.virtual),
        ("vnet3", True, InterfaceKind.virtual),
        ("tun0", True, InterfaceKind.virtual),
        ("tap0", True, InterfaceKind.virtual),
        ("wg0", True, InterfaceKind.virtual),
        ("tailscale0", True, InterfaceKind.virtual),
        ("cni0", True, InterfaceKind.virtual),
        ("flannel.1", True, InterfaceKind.virtual),
        ("cali12ab", True, InterfaceKind.virtual),
        ("veth0", False, InterfaceKind.virtual),  # by name, even where sysfs does not say
        ("ifb0", True, InterfaceKind.virtual),  # by sysfs alone
        ("bond0", False, InterfaceKind.other),
        ("ib0", False, InterfaceKind.other),
    ],
)
def test_interface_kind(tree, name, in_virtual_sysfs, kind):
    if in_virtual_sysfs:
        (tree.sys / "devices" / "virtual" / "net" / name).mkdir(parents=True)
    assert classify_interface(name, tree.sys) == kind


def test_an_idle_interface_reads_zero_until_its_counters_move_again(tree, collector):
    tree.net_dev({"enp1s0f0np0": {"rx_bytes": 1_000, "tx_errs": 4}})
    collector.sample(0.0)
    for now in (1.0, 2.0, 3.0):  # unchanged counters: the idle answer is reused, and must stay right
        idle = by_name(collector.sample(now))["enp1s0f0np0"]
        assert (idle.rx_bytes_per_s, idle.tx_errors, idle.mtu) == (0.0, 4, 9000)
    tree.net_dev({"enp1s0f0np0": {"rx_bytes": 3_000, "tx_errs": 5}})
    busy = by_name(collector.sample(4.0))["enp1s0f0np0"]
    assert (busy.rx_bytes_per_s, busy.tx_errors) == (2_000.0, 5)  # over the last second, not since idle


def test_addresses_keep_their_prefix_in_networks(tree):
    # The topology view needs the subnet to tell a point-to-point cable from a switch.
    tree.interface("enp1s0f0np0", speed="200000", mtu=9000)
    tree.net_dev({"enp1s0f0np0": {"rx_bytes": 1}})
    source = Addresses({"enp1s0f0np0": ["10.0.0.1/30", "fe80::1%enp1s0f0np0/64"]})
    [fabric] = NetworkCollector(tree.proc, tree.sys, addresses=source).sample(0.0)
    assert fabric.addresses == ["10.0.0.1", "fe80::1%enp1s0f0np0"]
    assert fabric.networks == ["10.0.0.1/30", "fe80::1%enp1s0f0np0/64"]


def test_psutil_addresses_carry_the_prefix_length():
    from sparksync_agent.collectors.network import psutil_addresses

    assert "127.0.0.1/8" in psutil_addresses()["lo"]


class FakeWatch:
    """A LinkWatch whose news the test decides."""

    available = True

    def __init__(self):
        self.news = False
        self.asked = 0

    def changed(self) -> bool:
        self.asked += 1
        news, self.news = self.news, False
        return news

    def close(self) -> None:
        pass


def test_with_a_link_watch_links_are_re_read_on_the_kernels_news_not_every_five_seconds(tree, addresses):
    tree.interface("enp1s0f0np0", speed="200000", mtu=9000)
    tree.net_dev({"enp1s0f0np0": {}})
    watch = FakeWatch()
    collector = NetworkCollector(tree.proc, tree.sys, addresses=addresses, link_watch=watch)
    assert by_name(collector.sample(0.0))["enp1s0f0np0"].mtu == 9000
    tree.interface("enp1s0f0np0", speed="200000", mtu=1500)
    for now in (1.0, 6.0, 30.0):  # no news: the blind 5-second re-read is gone
        assert by_name(collector.sample(now))["enp1s0f0np0"].mtu == 9000
    assert addresses.calls == 1
    watch.news = True
    collector.sample(30.5)  # asked at most about once a second
    assert watch.news and by_name(collector.sample(31.0))["enp1s0f0np0"].mtu == 1500
    assert addresses.calls == 2
    tree.interface("enp1s0f0np0", speed="200000", mtu=4000)
    assert by_name(collector.sample(91.5))["enp1s0f0np0"].mtu == 4000  # the safety re-read, news or not


def test_without_a_working_watch_the_timer_re_reads_the_links(tree, addresses):
    class Unavailable(FakeWatch):
        available = False

    tree.interface("enp1s0f0np0", speed="200000", mtu=9000)
    tree.net_dev({"enp1s0f0np0": {}})
    collector = NetworkCollector(tree.proc, tree.sys, addresses=addresses, link_watch=Unavailable())
    collector.sample(0.0)
    tree.interface("enp1s0f0np0", speed="200000", mtu=1500)
    assert by_name(collector.sample(5.0))["enp1s0f0np0"].mtu == 1500
