"""The Topology tab offscreen: fed samples, it draws the links with their rates and flags the bad ones."""

from __future__ import annotations

import pytest
from sparksync_agent.protocol import Snapshot

from sparksync.core.topology import TopologyKind, TopologySettings
from tests.core.topology_samples import GBIT, PORTS, direct_pair, port, ring, sample, switched

pytestmark = pytest.mark.gui


@pytest.fixture
def topo_view(qtbot):
    from sparksync.gui.topology.topology_view import TopologyView

    widget = TopologyView(refresh_ms=50)
    qtbot.addWidget(widget)
    widget.resize(1000, 640)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def feed(view, samples):
    for node, s in samples.items():
        view.add_sample(node, s)


def drawn(qtbot, view):
    """Wait for the view's own timer to draw what it was fed."""
    with qtbot.waitSignal(view.refreshed, timeout=10_000) as blocker:
        pass
    return blocker.args[0]


def test_a_direct_pair_is_drawn_with_each_directions_rate(qtbot, topo_view):
    feed(topo_view, direct_pair())
    topo = drawn(qtbot, topo_view)
    assert topo.kind is TopologyKind.direct
    (link,) = topo.links
    edge = topo_view.edge_for(link)
    assert edge.label.text() == "spark-1 → 40 Gb/s\nspark-2 → 8 Gb/s"
    assert not edge.warned and topo_view.warning_texts() == []
    assert "Topology: direct cable" in topo_view.summary.text() and "48 Gb/s" in topo_view.summary.text()
    line = edge.line.line()
    assert line.length() > 100  # drawn between the two nodes, not collapsed on one point


def test_rates_update_in_place_on_new_samples(qtbot, topo_view):
    feed(topo_view, direct_pair())
    first = drawn(qtbot, topo_view)
    edge = topo_view.edge_for(first.links[0])
    faster = direct_pair()
    faster["spark-1"] = sample(port(PORTS[0], "10.0.0.0/31", tx=150 * GBIT), ts=1001.0)
    feed(topo_view, {"spark-1": faster["spark-1"]})
    second = drawn(qtbot, topo_view)
    assert topo_view.edge_for(second.links[0]) is edge  # same drawing, new numbers
    assert edge.label.text().startswith("spark-1 → 150 Gb/s")


def test_a_ring_draws_every_cable_and_says_ring(qtbot, topo_view):
    feed(topo_view, ring(4))
    topo = drawn(qtbot, topo_view)
    assert topo.kind is TopologyKind.ring and len(topo_view.edges) == 4
    assert "Topology: ring" in topo_view.summary.text()
    assert topo_view.edge_for(topo.links[0]).label.text().startswith("spark-1 → 1 Gb/s")


def test_a_switch_is_drawn_as_its_own_place_in_the_middle(qtbot, topo_view):
    feed(topo_view, switched(8))
    topo = drawn(qtbot, topo_view)
    assert topo.kind is TopologyKind.switch
    assert topo_view.places["switch 10.10.0.0/24"] == (0.0, 0.0)
    spark3 = next(link for link in topo.links if link.a == "spark-3")
    assert topo_view.edge_for(spark3).label.text() == "spark-3 → 3 Gb/s\nswitch → 2 Gb/s"


def test_a_slow_port_is_listed_and_its_link_highlighted(qtbot, topo_view):
    feed(topo_view, direct_pair(speed_mbps=100_000))
    topo = drawn(qtbot, topo_view)
    edge = topo_view.edge_for(topo.links[0])
    assert edge.warned and edge.line.pen().widthF() > 2.0
    (text,) = topo_view.warning_texts()
    assert "runs at 100 Gb/s, below the expected 200 Gb/s" in text
    assert "below the expected" in edge.line.toolTip()


def test_an_mtu_mismatch_on_a_switch_highlights_only_the_odd_port(qtbot, topo_view):
    feed(topo_view, switched(4, mtus={2: 1500}))
    topo = drawn(qtbot, topo_view)
    warned = {link.a for link in topo.links if topo_view.edge_for(link).warned}
    assert warned == {"spark-2"}
    assert "MTU mismatch" in topo_view.warning_texts()[0]


def test_the_expected_speed_is_a_setting_of_the_view(qtbot, topo_view):
    feed(topo_view, direct_pair(speed_mbps=100_000))
    drawn(qtbot, topo_view)
    topo_view.set_settings(TopologySettings(expected_speed_mbps=100_000))
    drawn(qtbot, topo_view)
    assert topo_view.warning_texts() == []


def test_a_silent_node_loses_its_links(qtbot, topo_view):
    feed(topo_view, direct_pair())
    drawn(qtbot, topo_view)
    topo_view.add_sample("spark-1", sample(port(PORTS[0], "10.0.0.0/31"), ts=1100.0))  # spark-2 silent 100 s
    topo = drawn(qtbot, topo_view)
    assert topo.links == () and topo_view.edges == {}
    assert topo.warnings == ()  # nobody is linked, so no node is singled out
    assert "no fabric links seen yet" in topo_view.summary.text()
    assert topo_view.warnings.item(0).text().startswith("No fabric links yet: no two nodes share a fabric subnet")


def test_a_snapshot_without_a_sample_lists_the_node(qtbot, topo_view, local_snapshot):
    topo_view.add_snapshot("spark-9", local_snapshot)
    topo = drawn(qtbot, topo_view)
    assert topo.nodes == ("spark-9",)
    # Nothing to vouch for: no claim that "every link runs at its expected speed".
    (text,) = [topo_view.warnings.item(i).text() for i in range(topo_view.warnings.count())]
    assert text.startswith("No fabric links yet") and "expected speed" not in text
    # A lone node is drawn at a sensible size, not blown up to fill the canvas.
    assert 0 < topo_view.zoom() <= 1.5


def test_with_links_and_no_problem_the_view_says_so(qtbot, topo_view):
    feed(topo_view, direct_pair())
    drawn(qtbot, topo_view)
    assert topo_view.warnings.item(0).text().startswith("No problem found: every link runs at its expected speed")


@pytest.fixture
def local_snapshot():
    from sparksync_agent.protocol import NodeInfo

    info = NodeInfo(node_id="n", hostname="spark-9", arch="aarch64", os="Linux", kernel="6.8", cpu_count=20,
                    boot_time=0.0)
    return Snapshot(info=info, run_id="r", sample_hz=1.0)


def test_the_windows_topology_tab_is_fed_by_the_real_local_agent(qtbot, live_window):
    """The real path: a local agent's samples reach the Topology tab through the window's feed."""
    win = live_window
    win.tabs.setCurrentWidget(win.cluster)  # the Topology tab: the cluster assistant
    win.cluster.pages.setCurrentWidget(win.topology)  # its live traffic page
    qtbot.waitUntil(lambda: win.topology.topology is not None and win.node in win.topology.topology.nodes,
                    timeout=30_000)
    assert "Topology:" in win.topology.summary.text()


def test_a_ring_with_a_cable_out_names_the_ports_without_a_peer(qtbot, topo_view):
    samples = ring(4)
    samples["spark-4"] = sample(*[p for p in samples["spark-4"].net if p.name != PORTS[1]])
    feed(topo_view, samples)
    topo = drawn(qtbot, topo_view)
    assert topo.kind is TopologyKind.mixed
    assert "Ports without a peer: spark-1 enp1s0f0np0 (10.0.3.2/30)" in topo_view.summary.text()
