"""The dashboard's watch over a gateway launched on a lab node as a workload, through the app's real tunnels.

The setup is ``test_the_gateway_runs_on_a_node_as_a_workload_through_its_agent``'s:
the small model on n1, the large one on n2, and the gateway started on n1
through its agent (``switchyard launch --node``'s workload, fixed ¼ share).
The watch is the app's own (``app_watch`` over ``ClusterActions``): it finds
the gateway in the workload record and reaches it through an SSH tunnel on
the app's fleet, as the Dashboard tab does. Stopping the workload shows as
a problem in words while it stays recorded; once removed from the record
the watch drops it and closes its tunnel.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import pytest

from sparksync.core.nodes.cluster_actions import ClusterActions
from sparksync.core.workloads import running
from sparksync.core.workloads.orchestrator import Orchestrator
from sparksync.core.workloads.workload_store import WorkloadRecord
from sparksync.switchyard.gateway_watch import GatewayReading, GatewayWatch
from sparksync.switchyard.on_node import gateway_plan, gateway_recipe, node_config
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.lab.test_fleet_lab import LINK, agent_python, client_key, lab_agents  # noqa: F401
from tests.lab.test_switchyard_lab import GATEWAY_PORT, TwoModels, gateway_config, routed_pools, two_models
from tests.lab.test_workloads_lab import SPLIT_MODEL, binaries  # noqa: F401
from tests.lab.workload_lab import engine_tunnel

pytestmark = [pytest.mark.lab, pytest.mark.engine]

WAIT_S = 120.0  # generous: the machine is shared and loaded
POOLS = ["small", "large"]


@dataclass
class NodeGateway:
    models: TwoModels
    record: WorkloadRecord  # the gateway's workload
    dialer: object  # the lab's way into its namespaces, for the app's own fleet

    @property
    def key(self) -> str:
        return f"workload:{self.record.workload_id}:{self.record.endpoints[0].group}"

    def traffic(self, requests: int = 4) -> dict[str, int]:
        """``requests`` chat requests through a tunnel of the test's own; the pools that answered."""
        with engine_tunnel(self.models.fleet, self.record.endpoints[0].node, GATEWAY_PORT) as tunnel:
            return dict(routed_pools(f"http://127.0.0.1:{tunnel.local_port}", requests))

    def stop(self) -> None:
        """As ``sparksync workload stop --keep``: the processes end, the record stays."""
        assert not running.stop(self.models.agents, self.record, grace_s=5)

    def remove(self) -> None:
        """As ``sparksync workload stop``: stopped, forgotten by its node, and out of the record."""
        running.stop(self.models.agents, self.record, grace_s=5)
        running.forget(self.models.agents, self.record)
        self.models.store.remove(self.record.workload_id)


@contextmanager
def gateway_on_a_node(lab_agents, client_key, binaries, agent_python) -> Iterator[NodeGateway]:  # noqa: F811
    labs = []

    def make_agents(n: int):
        ssh_lab, agents = lab_agents(n)
        labs.append(ssh_lab)
        return ssh_lab, agents

    with two_models(make_agents, client_key, binaries, fabric=True, http_host="0.0.0.0") as models:
        head = models.small.endpoints[0].node
        config = gateway_config(models.small.workload_id, models.large.workload_id, "1/4", SPLIT_MODEL.name,
                                port=GATEWAY_PORT)  # fmt: skip
        resolved = node_config(config, models.store.list(), head, models.fabric)
        recipe = gateway_recipe(resolved, [str(agent_python), "-m", "sparksync"])
        orchestrator = Orchestrator(models.agents, models.store)
        view = orchestrator.start(
            orchestrator.prepare(gateway_plan(head), {recipe.name: recipe}, "switchyard")
        )
        gateway = NodeGateway(models, view.record, labs[0].dialer)
        try:
            assert view.state == "ready", [(r.ref.name, r.state, r.why()) for r in view.ranks]
            yield gateway
        finally:
            if any(r.workload_id == view.record.workload_id for r in models.store.list()):
                gateway.remove()


@contextmanager
def app_actions(gateway: NodeGateway, client_key) -> Iterator[ClusterActions]:  # noqa: F811
    """The app's actions, with a fleet of their own over the lab's nodes (paired in this test's registry)."""
    actions = ClusterActions(client_key=client_key, dialer=gateway.dialer, ssh_settings=LINK)
    try:
        yield actions
    finally:
        actions.close()


def poll_until(watch: GatewayWatch, done: Callable[[list[GatewayReading]], bool], what: str,
               between: Callable[[], object] = lambda: None) -> list[GatewayReading]:  # fmt: skip
    """Poll as the view does until ``done(readings)``; ``between`` runs before each poll (traffic)."""
    deadline = time.monotonic() + WAIT_S
    readings: list[GatewayReading] = []
    while time.monotonic() < deadline:
        between()
        readings, problems = watch.poll()
        assert problems == [], problems
        if done(readings):
            return readings
        time.sleep(0.5)
    pytest.fail(f"{what} did not happen within {WAIT_S} s; last readings: {readings}")


def flowing(readings: list[GatewayReading]) -> bool:
    """One gateway, read with figures, whose two pools both show tokens/s."""
    return (
        len(readings) == 1
        and readings[0].live is not None
        and all(p.tokens_per_s > 0 for p in readings[0].live.pools.values())
    )


def test_the_app_watch_reads_a_gateway_launched_on_a_node_through_its_tunnel(
    lab_agents,  # noqa: F811
    client_key,  # noqa: F811
    binaries,  # noqa: F811
    agent_python,  # noqa: F811
):
    from sparksync.gui.switchyard.switchyard_view import app_watch  # the watch exactly as the app builds it

    with gateway_on_a_node(lab_agents, client_key, binaries, agent_python) as gateway:
        assert gateway.traffic(8) == {"small": 6, "large": 2}
        sent = {"small": 6, "large": 2}

        def more() -> None:  # keeps the gateway's 10 s tokens/s window filled while the watch reads
            for pool, count in gateway.traffic(4).items():
                sent[pool] += count

        with app_actions(gateway, client_key) as actions:
            watch = app_watch(actions)
            try:
                (reading,) = poll_until(
                    watch, flowing, "tokens/s of both pools through the app's tunnel", more
                )
                assert reading.key == gateway.key and reading.origin == "workload"
                assert reading.problem is None
                assert gateway.record.workload_id in reading.label and "n1" in reading.label
                assert reading.url.startswith("http://127.0.0.1:")  # a local port of the app's tunnel
                live = reading.live
                assert list(live.pools) == POOLS  # in the config's order
                assert {p: live.pools[p].requests for p in POOLS} == sent
                assert sent["small"] == 3 * sent["large"]  # the fixed ¼ share, request for request
                assert live.pools["small"].share == pytest.approx(0.75)
                assert live.pools["large"].share == pytest.approx(0.25)
                assert all(live.pools[p].output_tokens > 0 for p in POOLS)
                assert all((live.pools[p].replicas_up, live.pools[p].replicas) == (1, 1) for p in POOLS)
                assert all(reading.rates[p][1][-1] > 0 for p in POOLS)  # the plot's latest point

                # Stopped but still recorded: the same tunnel, and why there are no figures, in words.
                gateway.stop()
                (stopped,) = poll_until(watch, lambda r: len(r) == 1 and r[0].problem is not None,
                                        "the stopped gateway's problem")  # fmt: skip
                assert stopped.url == reading.url and stopped.live is None
                assert "does not answer" in stopped.problem

                # Out of the record: the watch drops it and closes its tunnel.
                gateway.remove()
                assert poll_until(watch, lambda r: r == [], "the removed gateway leaving the watch") == []
                with pytest.raises(httpx.ConnectError):
                    httpx.get(reading.url + "/metrics", timeout=10, trust_env=False)
            finally:
                watch.close()


@pytest.mark.gui
def test_the_dashboard_section_shows_a_gateway_launched_on_a_node(
    qtbot,
    lab_agents,  # noqa: F811
    client_key,  # noqa: F811
    binaries,  # noqa: F811
    agent_python,  # noqa: F811
):
    from sparksync.gui.switchyard.switchyard_view import SwitchyardView, app_watch

    with (
        gateway_on_a_node(lab_agents, client_key, binaries, agent_python) as gateway,
        app_actions(gateway, client_key) as actions,
    ):
        watch = app_watch(actions)
        view = SwitchyardView(watch, poll_ms=500)
        qtbot.addWidget(view)
        view.resize(1100, 320)
        view.show()
        try:
            view.start()
            assert gateway.traffic(8) == {"small": 6, "large": 2}
            qtbot.waitUntil(lambda: gateway.key in view.panels, timeout=WAIT_S * 1000)
            panel = view.panels[gateway.key]
            qtbot.waitUntil(lambda: panel.split.text() == "small 75% | large 25%", timeout=WAIT_S * 1000)
            qtbot.waitUntil(lambda: "1/1" in panel.figures.text(), timeout=WAIT_S * 1000)
            assert gateway.record.workload_id in panel.title.text() and not panel.problem.isVisible()

            def plotted() -> bool:  # more traffic until a poll falls in the gateway's 10 s rate window
                if all((panel.latest_rate(p) or 0) > 0 for p in POOLS):
                    return True
                gateway.traffic(4)
                return False

            qtbot.waitUntil(plotted, timeout=WAIT_S * 1000)
            gateway.remove()
            qtbot.waitUntil(lambda: view.panels == {}, timeout=WAIT_S * 1000)
            assert "no gateway is running" in view.hint.text()
        finally:
            assert view.shutdown(30)
            watch.close()
