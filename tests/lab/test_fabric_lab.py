"""The fabric end to end on lab nodes: real sshd, real agents, real sudo, real iproute2 and netplan generate.

Eight nodes with CX-7-like ports (tests/lab/fabric_lab.py) are detected,
planned, applied and rolled back through the CLI and the core, as a user
would; the broken cases (a wrong cabling, a subnet clash, a wrong sudo
password, a node that fails mid-apply) each leave every node as it was.
veths report 10 Gb/s, so the expected speed is the veth's.
"""

from __future__ import annotations

import ipaddress
import json
import sys
import time

import pytest

from sparksync.core.fabric import (
    FabricKind,
    FabricOperations,
    FabricPlanError,
    FabricStore,
    PlanState,
    ProblemKind,
    make_plan,
)
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.lab.fabric_cluster import fabric_cluster  # noqa: F401  (a fixture)
from tests.lab.fabric_lab import CX7_INTERFACES, VETH_SPEED_MBPS, set_password
from tests.lab.test_fleet_lab import REPO, agent_python, cli_env, client_key, open_fleet  # noqa: F401

pytestmark = pytest.mark.lab

SPEED = ["--expected-speed", str(VETH_SPEED_MBPS)]


def run_cli(cluster, keyring, *args: str, password: str | None = None):
    ssh_lab = cluster.ssh_lab
    argv = [*args] if password is None else [*args, "--sudo-password-stdin"]
    return ssh_lab.lab.exec(ssh_lab.client, ["sh", "-c", 'printf "%s\\n" "$PW" | "$@"', "sh",
                                             *_cli(argv)], env={**cli_env(keyring), "PW": password or ""},
                            cwd=REPO, timeout=300)


def _cli(argv):
    return [sys.executable, "-m", "sparksync", *argv]


def fabric_state(cluster) -> dict[str, dict[str, tuple[list[str], int]]]:
    """Per node, per CX-7 netdev (that is still there): its IPv4 addresses and MTU, read inside the node."""
    return {
        node.name: {name: (cluster.fabric.addresses(node, name), cluster.fabric.mtu(node, name))
                    for name in CX7_INTERFACES if cluster.fabric.has(node, name)}
        for node in cluster.nodes
    }  # fmt: skip


def pristine(cluster) -> bool:
    return all(v == ([], 1500) for per_node in fabric_state(cluster).values() for v in per_node.values())


def ping(cluster, node, address: str, size: int = 8972) -> bool:
    """A don't-fragment ping at the planned MTU (9000 minus 28 bytes of headers)."""
    done = cluster.ssh_lab.lab.exec(node, ["ping", "-c", "1", "-W", "2", "-M", "do", "-s", str(size), address])
    return done.returncode == 0


def test_switch_of_eight_detect_plan_apply_rollback_through_the_cli(fabric_cluster, real_keyring):  # noqa: F811
    cluster = fabric_cluster(8, "switch")
    done = run_cli(cluster, real_keyring, "cluster", "detect", "--json", *SPEED)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["kind"] == "switch" and found["plannable"]
    [switch] = found["segments"]
    assert sorted(e["node"] for e in switch["ends"]) == sorted(cluster.names)
    # Port 1 of each node is empty: named, not fatal.
    assert {p["kind"] for p in found["problems"]} == {"no_carrier"}

    done = run_cli(cluster, real_keyring, "cluster", "plan", "--json", *SPEED)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)["plan"]
    assert [link["subnet"] for link in plan["links"]] == ["10.100.0.0/24", "10.100.1.0/24"]
    assert pristine(cluster)  # planning changes nothing

    done = run_cli(cluster, real_keyring, "cluster", "apply", "--json", password=cluster.password)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and set(report["nodes"]) == set(cluster.names)
    assert all(n["result"]["netplan_validated"] and n["result"]["applier"] == "iproute2" for n in report["nodes"].values())
    for name in cluster.names:  # per-node progress on stderr
        assert f"{name}: apply ok" in done.stderr
    assert cluster.password not in done.stdout + done.stderr
    state = fabric_state(cluster)
    n1, n8 = cluster.nodes[0], cluster.nodes[7]
    assert state["n1"]["enp1s0f0np0"] == (["10.100.0.1/24"], 9000)
    assert state["n1"]["enP2p1s0f0np0"] == (["10.100.1.1/24"], 9000)
    assert state["n8"]["enp1s0f0np0"] == (["10.100.0.8/24"], 9000)
    assert ping(cluster, n1, "10.100.0.8") and ping(cluster, n8, "10.100.1.1")  # jumbo, don't fragment
    stored = FabricStore().load()
    assert stored.state is PlanState.applied
    env = stored.plan.env("n3")
    assert env["NCCL_SOCKET_IFNAME"] == "enp1s0f0np0,enP2p1s0f0np0" and env["GLOO_SOCKET_IFNAME"] == "enp1s0f0np0"

    done = run_cli(cluster, real_keyring, "cluster", "rollback", "--json", password=cluster.password)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["ok"]
    assert pristine(cluster)
    assert FabricStore().load().state is PlanState.rolled_back


def test_ring_of_eight_applies_with_a_warning_and_neighbours_talk(fabric_cluster, client_key):  # noqa: F811
    cluster = fabric_cluster(8, "ring")
    with open_fleet(cluster.ssh_lab, client_key) as fleet:
        ops = FabricOperations(fleet)
        found = ops.detect(cluster.names, VETH_SPEED_MBPS)
        assert found.topology.kind is FabricKind.ring and not found.topology.problems
        plan = make_plan(found.topology, found.reports)
        assert any("ring of 8" in w for w in plan.warnings)
        report = ops.apply(plan, cluster.password)
        assert report.ok, report.summary()
        # n1 port 1 is cabled to n2 port 0: the two twins each share a subnet with their counterpart.
        n1, n2 = plan.node("n1"), plan.node("n2")
        for twin in (0, 1):
            a = next(i for i in n1.interfaces if i.port == 1 and i.twin == twin)
            b = next(i for i in n2.interfaces if i.port == 0 and i.twin == twin)
            assert ipaddress.ip_interface(a.address).network == ipaddress.ip_interface(b.address).network
            assert ping(cluster, cluster.nodes[0], str(ipaddress.ip_interface(b.address).ip))
        assert ops.rollback(cluster.names, cluster.password).ok
    assert pristine(cluster)


def test_wrong_cabling_is_named_and_not_planned(fabric_cluster, real_keyring):  # noqa: F811
    def open_ring_with_a_self_cable(fabric):
        n = fabric.nodes
        fabric.cable(n[0], 1, n[1], 0)
        fabric.cable(n[1], 1, n[2], 0)
        fabric.cable(n[3], 0, n[3], 1)  # n4 cabled to itself

    cluster = fabric_cluster(4, open_ring_with_a_self_cable)
    done = run_cli(cluster, real_keyring, "cluster", "detect", "--json", *SPEED)
    found = json.loads(done.stdout)
    assert found["kind"] == "mixed" and not found["plannable"]
    kinds = {p["kind"] for p in found["problems"]}
    assert {"self_cabled", "open_ring"} <= kinds, found["problems"]
    assert any("n4 is cabled to itself" in p["message"] for p in found["problems"])
    done = run_cli(cluster, real_keyring, "cluster", "detect", *SPEED)
    print(done.stdout)
    assert done.returncode == 0 and done.stdout.startswith("Fabric: mixed or broken, 4 nodes")
    assert "  n1 port 1 <-> n2 port 0  [10G]" in done.stdout and "error: n4 is cabled to itself" in done.stdout
    done = run_cli(cluster, real_keyring, "cluster", "plan", *SPEED)
    assert done.returncode == 2 and "cannot be planned" in done.stderr and "n4 is cabled to itself" in done.stderr


def test_subnet_clash_is_refused_naming_subnet_and_node(fabric_cluster, real_keyring):  # noqa: F811
    cluster = fabric_cluster(3, "switch")
    n2 = cluster.nodes[1]
    cluster.ssh_lab.lab.exec(n2, ["ip", "addr", "add", "10.100.1.50/24", "dev", "eth0"], check=True)
    done = run_cli(cluster, real_keyring, "cluster", "plan", *SPEED)
    assert done.returncode == 2
    assert "subnet 10.100.1.0/24" in done.stderr and "node n2" in done.stderr
    done = run_cli(cluster, real_keyring, "cluster", "plan", "--base", "10.150.0.0/16", *SPEED)
    assert done.returncode == 0, done.stderr
    assert pristine(cluster)


def test_wrong_sudo_password_changes_nothing(fabric_cluster, client_key):  # noqa: F811
    cluster = fabric_cluster(3, "switch")
    with open_fleet(cluster.ssh_lab, client_key) as fleet:
        ops = FabricOperations(fleet)
        found = ops.detect(cluster.names, VETH_SPEED_MBPS)
        plan = make_plan(found.topology, found.reports)
        report = ops.apply(plan, "not-the-password")
    assert not report.ok and pristine(cluster)
    assert {o.code for o in report.outcomes.values()} == {"sudo_refused"}
    assert "sudo refused" in report.summary()
    assert "not-the-password" not in report.summary()


def test_one_node_with_another_sudo_password_rolls_the_others_back(fabric_cluster, client_key):  # noqa: F811
    cluster = fabric_cluster(8, "switch")
    set_password(cluster.ssh_lab.user(cluster.nodes[4]), "another-Passw0rd")
    with open_fleet(cluster.ssh_lab, client_key) as fleet:
        ops = FabricOperations(fleet)
        found = ops.detect(cluster.names, VETH_SPEED_MBPS)
        report = ops.apply(make_plan(found.topology, found.reports), cluster.password)
    assert not report.ok
    assert [o.node for o in report.failed] == ["n5"] and report.outcomes["n5"].code == "sudo_refused"
    assert all(report.outcomes[n].undone for n in cluster.names if n != "n5")
    assert pristine(cluster)


def test_failure_on_one_node_mid_apply_leaves_nothing_half_configured(fabric_cluster, client_key):  # noqa: F811
    def ring_with_a_capped_port(fabric):
        fabric.ring()
        fabric.cap_mtu(fabric.nodes[4], "enP2p1s0f1np1")  # n5's last netdev cannot take MTU 9000

    cluster = fabric_cluster(8, ring_with_a_capped_port)
    with open_fleet(cluster.ssh_lab, client_key) as fleet:
        ops = FabricOperations(fleet)
        found = ops.detect(cluster.names, VETH_SPEED_MBPS)
        assert found.topology.kind is FabricKind.ring, [p.message for p in found.topology.problems]
        report = ops.apply(make_plan(found.topology, found.reports), cluster.password)
    assert not report.ok
    [failed] = report.failed
    assert failed.node == "n5" and "enP2p1s0f1np1" in failed.error and "put back" in failed.error
    assert failed.result is not None and failed.result.restored
    assert any(step.startswith("enp1s0f0np0: MTU 9000") for step in failed.result.steps)  # it had begun
    assert all(report.outcomes[n].undone for n in cluster.names if n != "n5")
    assert "n5" in report.summary() and "undone on" in report.summary()
    assert pristine(cluster)


def test_apply_refuses_a_plan_that_no_longer_fits(fabric_cluster, client_key):  # noqa: F811
    cluster = fabric_cluster(3, "switch")
    with open_fleet(cluster.ssh_lab, client_key) as fleet:
        ops = FabricOperations(fleet)
        found = ops.detect(cluster.names, VETH_SPEED_MBPS)
        plan = make_plan(found.topology, found.reports)
        cluster.fabric.remove_interface(cluster.nodes[2], "enP2p1s0f0np0")
        with pytest.raises(FabricPlanError, match="n3 no longer has enP2p1s0f0np0"):
            ops.apply(plan, cluster.password)
    assert pristine(cluster)


def test_slow_link_is_named(fabric_cluster, client_key):  # noqa: F811
    cluster = fabric_cluster(3, "switch")
    with open_fleet(cluster.ssh_lab, client_key) as fleet:
        found = FabricOperations(fleet).detect(cluster.names)  # expects 200 Gb/s; a veth says 10
    slow = [p for p in found.topology.problems if p.kind is ProblemKind.slow_link]
    assert len(slow) == 3 and "runs at 10 Gb/s, below the expected 200 Gb/s" in slow[0].message
    assert found.topology.kind is FabricKind.switch


ENV_PROBE = ("echo fabric: NCCL=$NCCL_SOCKET_IFNAME GLOO=$GLOO_SOCKET_IFNAME UCX=$UCX_NET_DEVICES "
             "OMPI=$OMPI_MCA_btl_tcp_if_include me={node_ip} head={head_ip}; "
             "ping -c 1 -W 2 -M do -s 8972 {head_ip} >/dev/null && echo jumbo-ok; sleep 120")


def test_direct_pair_applied_then_a_workload_starts_with_the_plans_environment(fabric_cluster, real_keyring):  # noqa: F811
    cluster = fabric_cluster(2, "direct")
    for step in (["cluster", "plan", *SPEED], ["cluster", "apply"]):
        done = run_cli(cluster, real_keyring, *step, password=cluster.password if step[1] == "apply" else None)
        assert done.returncode == 0, done.stdout + done.stderr
    plan = FabricStore().applied()
    assert plan is not None and plan.topology is FabricKind.direct
    argv = json.dumps({"argv": ["sh", "-c", ENV_PROBE]})
    done = run_cli(cluster, real_keyring, "workload", "start", "custom", "--nodes", "n1,n2", f"--set=custom={argv}",
                   "--set=parallelism.data=2", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    workload_id = json.loads(done.stdout)["workload_id"]
    try:
        for rank, node in ((0, "n1"), (1, "n2")):
            env = plan.env(node)
            want = (f"fabric: NCCL={env['NCCL_SOCKET_IFNAME']} GLOO={env['GLOO_SOCKET_IFNAME']} "
                    f"UCX={env['UCX_NET_DEVICES']} OMPI={env['OMPI_MCA_btl_tcp_if_include']} "
                    f"me={plan.node(node).fabric_ip} head={plan.node('n1').fabric_ip}")
            text = ""
            for _ in range(100):
                logs = run_cli(cluster, real_keyring, "workload", "logs", workload_id, "--rank", str(rank))
                text = logs.stdout
                if "jumbo-ok" in text:
                    break
                time.sleep(0.2)
            assert want in text and "jumbo-ok" in text, text
    finally:
        stopped = run_cli(cluster, real_keyring, "workload", "stop", workload_id)
        assert stopped.returncode == 0, stopped.stderr
    assert run_cli(cluster, real_keyring, "cluster", "rollback", password=cluster.password).returncode == 0
    assert pristine(cluster)


def test_ring_of_four_and_a_cut_cable_opens_it(fabric_cluster, client_key):  # noqa: F811
    cluster = fabric_cluster(4, "ring")
    with open_fleet(cluster.ssh_lab, client_key) as fleet:
        ops = FabricOperations(fleet)
        found = ops.detect(cluster.names, VETH_SPEED_MBPS)
        assert found.topology.kind is FabricKind.ring and len(found.topology.graph.cables) == 4
        plan = make_plan(found.topology, found.reports)
        assert any("ring of 4" in w for w in plan.warnings)
        cluster.fabric.cut(cluster.nodes[2], 1)  # n3 port 1 <-> n4 port 0 unplugged at n3's end
        found = ops.detect(cluster.names, VETH_SPEED_MBPS)
    assert found.topology.kind is FabricKind.mixed
    kinds = {p.kind for p in found.topology.problems}
    assert ProblemKind.open_ring in kinds and ProblemKind.no_carrier in kinds
    [open_ring] = [p for p in found.topology.problems if p.kind is ProblemKind.open_ring]
    assert open_ring.nodes == ("n3", "n4")


def test_both_ports_of_every_node_on_one_switch(fabric_cluster, client_key):  # noqa: F811
    cluster = fabric_cluster(3, lambda fabric: fabric.switch(ports=(0, 1)))
    with open_fleet(cluster.ssh_lab, client_key) as fleet:
        ops = FabricOperations(fleet)
        found = ops.detect(cluster.names, VETH_SPEED_MBPS)
        assert found.topology.kind is FabricKind.switch and not found.topology.problems
        plan = make_plan(found.topology, found.reports)
        assert len(plan.links) == 4
        report = ops.apply(plan, cluster.password)
        assert report.ok, report.summary()
        n3 = plan.node("n3")
        for iface in n3.interfaces:  # every subnet reaches n3 from n1
            assert ping(cluster, cluster.nodes[0], str(ipaddress.ip_interface(iface.address).ip)), iface
        assert ops.rollback(cluster.names, cluster.password).ok
    assert pristine(cluster)
