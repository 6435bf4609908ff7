"""The Nodes panel: discovery events, slots, rename through the core, unpair, live states, deploy bars."""

from __future__ import annotations

import threading

import pytest

from sparksync.core.nodes.cluster_actions import ClusterActions
from sparksync.core.discovery import Discovery
from sparksync.core.nodes.rows import DeployProgress, FleetState, NodeState
from sparksync.core.nodes.registry import MAX_NODES, Registry
from sparksync.core.ssh.secrets import SecretStore
from sparksync.core.ssh.unpair import node_secret_name
from sparksync.core.workloads.plan import Group, Plan
from sparksync.core.workloads.workload_store import RankRef, WorkloadRecord, WorkloadStore
from tests.core.keyring_fixtures import MemoryKeyring, global_keyring
from tests.core.mdns_publisher import Publisher, doc_address, ssh_service, unique_host
from tests.core.node_factory import paired_node
from tests.gui.fake_core import FakeActions

pytestmark = pytest.mark.gui


@pytest.fixture
def panel_for(qtbot):
    made = []

    def make(actions):
        from sparksync.gui.nodes.nodes_panel import NodesPanel

        panel = NodesPanel(actions)
        qtbot.addWidget(panel)
        panel.show()
        made.append(panel)
        return panel

    yield make
    for panel in made:
        panel.detach_all()
        assert panel.jobs.wait(30)


def loaded(qtbot, panel):
    with qtbot.waitSignal(panel.paired_changed, timeout=10_000):
        panel.reload()
    return panel


class Subscribers:
    """A fake event source (fleet states, deploy progress) that emits from its own thread."""

    def __init__(self):
        self.listeners = []

    def add_listener(self, listener):
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def emit(self, *args):
        thread = threading.Thread(target=lambda: [listener(*args) for listener in list(self.listeners)])
        thread.start()
        thread.join()


def test_the_list_follows_real_mdns_discovery_on_loopback(qtbot, panel_for):
    panel = panel_for(FakeActions())
    host = unique_host("spark")
    publisher = Publisher("127.0.0.1")
    discovery = Discovery(["127.0.0.1"], resolve_timeout_s=1.0)
    try:
        discovery.start()
        panel.attach_discovery(discovery)
        service = ssh_service(host, [doc_address()])
        publisher.register(service)
        qtbot.waitUntil(lambda: any(r[0] == f"{host}.local" for r in panel.row_texts()), timeout=20_000)
        row = next(r for r in panel.row_texts() if r[0] == f"{host}.local")
        assert (
            row[2] == "discovered" and row[3] == "looks like a DGX Spark; not paired" and row[4] == "just now"
        )
        publisher.unregister(service)
        qtbot.waitUntil(lambda: all(r[0] != f"{host}.local" for r in panel.row_texts()), timeout=20_000)
    finally:
        panel.detach_all()
        discovery.stop()
        publisher.close()


def test_slots_text_and_a_full_cluster(qtbot, panel_for):
    panel = loaded(qtbot, panel_for(FakeActions([f"n{i}" for i in range(5)])))
    assert panel.slots_label.text() == f"5 of {MAX_NODES} slots used"
    assert [r[:3] for r in panel.row_texts()] == [(f"n{i}", f"10.0.0.{i + 1}", "paired") for i in range(5)]
    full = loaded(qtbot, panel_for(FakeActions([f"n{i}" for i in range(MAX_NODES)])))
    assert full.slots_label.text() == f"{MAX_NODES} of {MAX_NODES} slots used"
    assert not full.pair_button.isEnabled() and "unpair a node first" in full.pair_button.toolTip()


def test_an_empty_list_says_how_to_find_and_pair_a_node(qtbot, panel_for):
    panel = loaded(qtbot, panel_for(FakeActions([])))
    assert panel.empty_hint.isVisible() and not panel.table.isVisible()
    hint = panel.empty_hint.text()
    assert "No nodes yet" in hint and "Pair…" in hint and "hostname or IP" in hint and "--scan" in hint
    filled = loaded(qtbot, panel_for(FakeActions(["n1"])))
    assert filled.table.isVisible() and not filled.empty_hint.isVisible()


def test_rename_goes_through_the_core(qtbot, panel_for):
    registry = Registry()
    node = paired_node("spark-aaaa", 1)
    registry.add(node)
    plan = Plan(groups=[Group(recipe="r", nodes=["spark-aaaa"])])
    rank = RankRef(node="spark-aaaa", name="r-1.0.llama-server", group="r-1", rank=0, role="llama-server")
    WorkloadStore().add(WorkloadRecord(workload_id="w", recipes=["r"], plan=plan, ranks=[rank]))
    keyring = MemoryKeyring()
    with global_keyring(keyring):
        SecretStore().set(node_secret_name(node.node_id, "agent-token"), "tok")
        panel = loaded(qtbot, panel_for(ClusterActions()))
        panel.ask_text = lambda title, label, value: "rack-1"
        assert panel.select("paired:spark-aaaa") and panel.rename_button.isEnabled()
        with qtbot.waitSignal(panel.paired_changed, timeout=10_000):
            panel.rename_button.click()
        assert Registry().names() == ["rack-1"] and Registry().get("rack-1").node_id == node.node_id
        assert SecretStore().get(node_secret_name(node.node_id, "agent-token")) == "tok"
    assert panel.row_texts()[0][0] == "rack-1"
    assert WorkloadStore().get("w").nodes() == ["rack-1"]  # its workload stays attached


def test_a_refused_rename_reaches_the_error_signal_in_plain_words(qtbot, panel_for):
    Registry().add(paired_node("spark-aaaa", 1))
    panel = loaded(qtbot, panel_for(ClusterActions()))
    with qtbot.waitSignal(panel.error_raised, timeout=10_000) as error:
        panel.rename("spark-aaaa", "bad name")
    assert "cannot be a node name" in error.args[0]
    assert Registry().names() == ["spark-aaaa"]


def test_unpair_asks_first(qtbot, panel_for):
    fake = FakeActions(["n1", "n2"])
    panel = loaded(qtbot, panel_for(fake))
    panel.ask_yes_no = lambda title, text: False
    assert not panel.unpair("n1") and fake.called("unpair") == []
    panel.ask_yes_no = lambda title, text: True
    with qtbot.waitSignal(panel.paired_changed, timeout=10_000):
        assert panel.unpair("n1")
    assert fake.called("unpair") == [("n1",)] and [r[0] for r in panel.row_texts()] == ["n2"]
    assert panel.slots_label.text() == f"1 of {MAX_NODES} slots used"


def test_live_states_from_another_thread_show_in_the_list(qtbot, panel_for):
    panel = loaded(qtbot, panel_for(FakeActions(["n1", "n2"])))
    source = Subscribers()
    panel.attach_states(source)
    source.emit("n1", FleetState(NodeState.ONLINE, None, None))
    source.emit("n2", FleetState(NodeState.OFFLINE, "no route to host", None))
    qtbot.waitUntil(
        lambda: [r[2:4] for r in panel.row_texts()] == [("online", ""), ("offline", "no route to host")]
    )


def test_deploy_progress_bars_take_per_node_steps(qtbot, panel_for):
    panel = panel_for(FakeActions(["n1"]))
    source = Subscribers()
    panel.deploys.attach(source)
    source.emit(DeployProgress("n1", "uploading the bundle", 0.25))
    source.emit(DeployProgress("n2", "checking the node", None))
    qtbot.waitUntil(
        lambda: set(panel.deploys.bars) == {"n1", "n2"} and panel.deploys.bars["n1"].value() == 250
    )
    assert panel.deploys.bars["n2"].maximum() == 0  # busy: length unknown
    source.emit(DeployProgress("n1", "done", 1.0, done=True))
    source.emit(DeployProgress("n2", "installing", 0.5, done=True, error="no space left on the node"))
    qtbot.waitUntil(lambda: panel.deploys.bars["n2"].format().startswith("failed"))
    assert panel.deploys.bars["n1"].format() == "done" and panel.deploys.bars["n1"].value() == 1000
    assert "no space left" in panel.deploys.bars["n2"].toolTip()


def test_pairing_a_discovered_node_prefills_it_shows_pairing_and_passes_its_advertised_keys(qtbot, panel_for):
    from sparksync.core.discovery.model import DiscoveredNode

    fake = FakeActions()
    requests = []
    inner = fake.pair

    def pair(request, **kw):
        requests.append(request)
        return inner(request, **kw)

    fake.pair = pair
    panel = panel_for(fake)
    advertised = {"ed25519": "SHA256:" + "Q" * 43}
    node = DiscoveredNode(key="fp:x", hostname="spark-9a9a.local", addresses=["192.168.1.44"], kind="agent",
                          host_key_fingerprints=advertised, last_seen=0.0)  # fmt: skip
    panel.rows.on_discovery("added", node)
    assert panel.select("fp:x")
    panel.pair_button.click()
    dialog = panel.pair_dialog
    assert dialog.host.text() == "spark-9a9a.local"
    dialog.password.setText("pw")
    with qtbot.waitSignal(dialog.fingerprint_received, timeout=10_000):
        dialog.check_button.click()
    assert panel.rows.row("fp:x").state.value == "pairing" and panel.row_texts()[0][2] == "pairing"
    with qtbot.waitSignal(panel.paired_changed, timeout=10_000):
        dialog.trust_button.click()
    assert requests[0].advertised_fingerprints == advertised
    assert "spark-new" in [r[0] for r in panel.row_texts()]
    dialog.close_button.click()  # "Later": the dialog offered the deploy as its next step
    assert panel.pair_dialog is None


def test_deploy_from_the_panel_shows_per_node_stages_then_the_outcome(qtbot, panel_for):
    from tests.gui.fake_core import FakeDeployActions

    fake = FakeDeployActions(["n1", "bad"])
    panel = loaded(qtbot, panel_for(fake))
    assert panel.select("paired:n1") and panel.deploy_button.isEnabled()
    panel.deploy_button.click()
    assert panel.rows.row("paired:n1").state.value == "deploying" and not panel.deploy_button.isEnabled()
    assert panel.deploys.cancel_button.isVisible()
    bar = panel.deploys.bars["n1"]
    qtbot.waitUntil(lambda: bar.value() == 275, timeout=10_000)  # 0.1 + 0.35 * 0.5
    assert bar.format().startswith("uploading the agent: 12 MB")
    with qtbot.waitSignal(panel.paired_changed, timeout=10_000):
        fake.release.set()
    assert bar.format() == "done" and bar.value() == 1000
    assert panel.deploys.summary.text() == "1 of 1 node(s) run the agent 0.5.0."
    assert panel.rows.row("paired:n1").state.value == "paired" and not panel.deploys.cancel_button.isVisible()
    with qtbot.waitSignal(panel.error_raised, timeout=10_000) as error:
        panel.deploy(["bad"])
    assert "rolled-back: health check failed" in error.args[0]
    # The bar says it failed; the reason wraps under it instead of being clipped inside the bar.
    assert panel.deploys.bars["bad"].format() == "failed (why below)"
    error = panel.deploys.errors["bad"]
    assert error.text() == "health check failed" and error.wordWrap() and not error.isHidden()
    assert panel.deploys.errors["n1"].isHidden()
    qtbot.waitUntil(lambda: not panel.deploying(), timeout=10_000)
    assert "bad: rolled-back — health check failed" in panel.deploys.summary.text()


def test_the_pair_dialogs_deploy_button_starts_the_deploy_in_the_panel(qtbot, panel_for):
    from tests.gui.fake_core import FakeDeployActions

    fake = FakeDeployActions([])
    panel = loaded(qtbot, panel_for(fake))
    dialog = panel.open_pair_dialog()
    dialog.host.setText("10.0.0.9")
    dialog.user.setText("nvidia")
    dialog.password.setText("pw")
    with qtbot.waitSignal(dialog.fingerprint_received, timeout=10_000):
        dialog.check_button.click()
    with qtbot.waitSignal(panel.paired_changed, timeout=10_000):
        dialog.trust_button.click()
    assert dialog.deploy_button.isVisible()
    dialog.deploy_button.click()
    qtbot.waitUntil(lambda: fake.called("deploy") == [("spark-new",)], timeout=10_000)
    assert panel.deploying() and "spark-new" in panel.deploys.bars
    with qtbot.waitSignal(panel.paired_changed, timeout=10_000):
        fake.release.set()
    assert panel.deploys.bars["spark-new"].format() == "done"
