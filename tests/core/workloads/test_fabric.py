"""The fabric environment, from agent-shaped reports, and the RoCEnante checks before launch."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sparksync.core.workloads.commands import llamacpp
from sparksync.core.workloads.errors import FabricError, RocenanteUnavailableError
from sparksync.core.workloads.fabric import (
    Backend,
    Fabric,
    FabricPort,
    FabricSettings,
    NodeFabric,
    RocenanteSettings,
    Topology,
    check_backend,
    fabric_env,
    fabric_warnings,
    node_ips,
    rdma_device_for,
)
from sparksync.core.workloads.launches import build_group
from sparksync.core.workloads.recipe import Recipe
from tests.core.workloads.fakes import FABRIC_ENV, net, nodes, rdma, spark, sparks

ROCENANTE = RocenanteSettings(
    library="/opt/rocenante/lib/librocenante-net.so",
    env={"ROCENANTE_TRANSPORT": "roce", "NCCL_IB_GID_INDEX": "3"},
)


def test_reports_keep_only_fabric_interfaces_that_are_up_with_an_ipv4_address():
    report = spark(1)
    # lo, enP7s7 (management) and enp1s0f0np0 (down) are left out; the IPv6 link-local address is skipped.
    assert report.ports == [
        FabricPort(name="enp1s0f1np1", ipv4="192.168.100.11", rdma_device="rocep1s0f1"),
        FabricPort(name="enP2p1s0f1np1", ipv4="192.168.101.11", rdma_device="roceP2p1s0f1"),
    ]


def test_roce_device_names_follow_the_netdev_pci_path():
    assert rdma_device_for("enp1s0f0np0") == "rocep1s0f0"
    assert rdma_device_for("enp1s0f1np1") == "rocep1s0f1"
    assert rdma_device_for("enP2p1s0f0np0") == "roceP2p1s0f0"
    assert rdma_device_for("enP2p1s0f1np1") == "roceP2p1s0f1"
    assert rdma_device_for("eth0") is None


def test_nccl_socket_ifname_gloo_ucx_ib_hca_and_ompi_come_from_the_reported_interfaces():
    assert fabric_env(sparks(2), "spark-2") == FABRIC_ENV


def test_a_roce_device_that_is_down_or_missing_is_not_offered_to_nccl():
    report = NodeFabric.from_samples(
        "spark-1",
        [net("enp1s0f1np1", "192.168.100.11"), net("enP2p1s0f1np1", "192.168.101.11")],
        [rdma("rocep1s0f1", state="DOWN")],
    )
    env = fabric_env(Fabric.of([report]), "spark-1")
    assert "NCCL_IB_HCA" not in env  # NCCL then uses sockets on the named interfaces
    assert env["NCCL_SOCKET_IFNAME"] == "enp1s0f1np1,enP2p1s0f1np1"


def test_addresses_with_a_prefix_length_are_read():
    report = NodeFabric.from_samples("n", [net("enp1s0f1np1", "192.168.100.11/24")], [rdma("rocep1s0f1")])
    assert report.ports[0].ipv4 == "192.168.100.11"


def test_the_primary_interface_can_be_chosen_per_node():
    settings = FabricSettings(primary_interface={"spark-2": "enP2p1s0f1np1"})
    fabric = sparks(2, settings)
    assert fabric.ip("spark-1") == "192.168.100.11"
    assert fabric.ip("spark-2") == "192.168.101.12"
    env = fabric_env(fabric, "spark-2")
    assert env["GLOO_SOCKET_IFNAME"] == env["TP_SOCKET_IFNAME"] == "enP2p1s0f1np1"
    assert env["NCCL_SOCKET_IFNAME"] == "enP2p1s0f1np1,enp1s0f1np1"


def test_rendezvous_is_the_first_nodes_fabric_ip_and_one_node_uses_loopback():
    assert node_ips(sparks(3), ["spark-3", "spark-1"]) == {
        "spark-3": "192.168.100.13",
        "spark-1": "192.168.100.11",
    }
    assert node_ips(Fabric(), ["anything"]) == {"anything": "127.0.0.1"}


def test_a_node_without_fabric_address_cannot_join_a_multi_node_group():
    bare = NodeFabric.from_samples("spark-2", [net("enp1s0f1np1", "fe80::2")], [rdma("rocep1s0f1")])
    fabric = Fabric.of([spark(1), bare])
    with pytest.raises(FabricError, match="node spark-2 reported no fabric interface with an IPv4 address"):
        fabric.ip("spark-2")
    with pytest.raises(FabricError, match="node spark-9 reported no fabric interface"):
        fabric.ip("spark-9")  # never reported at all: the same clear refusal, naming that node
    recipe = Recipe.model_validate(
        {"name": "r", "engine": "vllm", "model": "m", "parallelism": {"tensor": 2}}
    )
    with pytest.raises(FabricError, match="spark-2"):
        build_group("r-1", recipe, ["spark-1", "spark-2"], fabric)


def test_the_registry_fabric_interfaces_give_the_same_ports():
    from sparksync.core.nodes.registry import FabricInterface

    interface = FabricInterface(name="enp1s0f1np1", addresses=["192.168.100.11"], rdma_device="rocep1s0f1")
    paired = SimpleNamespace(name="spark-1", fabric=[interface])  # what from_registry reads of a PairedNode
    assert NodeFabric.from_registry(paired).ports == [spark(1).ports[0]]


# --- RoCEnante ---------------------------------------------------------------


def test_rocenante_env_adds_the_library_and_its_variables_from_the_settings():
    fabric = sparks(2, FabricSettings(backend=Backend.rocenante, rocenante=ROCENANTE), rocenante=True)
    check_backend(fabric, nodes(2), Backend.rocenante)
    assert fabric_env(fabric, "spark-1", Backend.rocenante) == {
        **FABRIC_ENV,
        "NCCL_NET_PLUGIN": "/opt/rocenante/lib/librocenante-net.so",
        "ROCENANTE_TRANSPORT": "roce",
        "NCCL_IB_GID_INDEX": "3",
    }
    assert fabric_env(fabric, "spark-1", Backend.nccl) == FABRIC_ENV


def test_rocenante_chosen_without_settings_is_refused_before_launch():
    fabric = sparks(2, FabricSettings(backend=Backend.rocenante), rocenante=True)
    with pytest.raises(RocenanteUnavailableError, match="fabric settings do not say where its library is"):
        check_backend(fabric, nodes(2), Backend.rocenante)


def test_rocenante_missing_on_a_node_is_refused_naming_the_node():
    fabric = Fabric.of([spark(1, True), spark(2, False), spark(3, True)], FabricSettings(rocenante=ROCENANTE))
    with pytest.raises(RocenanteUnavailableError) as caught:
        check_backend(fabric, nodes(3), Backend.rocenante)
    message = str(caught.value)
    assert "not installed on spark-2 " in message and "spark-1" not in message and "choose NCCL" in message


def test_rocenante_needs_roce_devices():
    no_roce = NodeFabric.from_samples(
        "spark-2", [net("enp1s0f1np1", "192.168.100.12")], [], rocenante_installed=True
    )
    fabric = Fabric.of([spark(1, True), no_roce], FabricSettings(rocenante=ROCENANTE))
    with pytest.raises(RocenanteUnavailableError, match="spark-2 reported no active RoCE device"):
        check_backend(fabric, nodes(2), Backend.rocenante)


def test_a_workload_choosing_rocenante_is_refused_at_build_when_a_node_lacks_it():
    fabric = Fabric.of([spark(1, True), spark(2, False)], FabricSettings(rocenante=ROCENANTE))
    recipe = Recipe.model_validate(
        {
            "name": "q",
            "engine": "sglang",
            "model": "m",
            "parallelism": {"tensor": 2},
            "collectives": "rocenante",
        }
    )
    with pytest.raises(RocenanteUnavailableError, match="spark-2"):
        build_group("q-1", recipe, nodes(2), fabric)
    # The same recipe on NCCL (the cluster default) launches.
    nccl = recipe.model_copy(update={"collectives": None})
    assert build_group("q-1", nccl, nodes(2), fabric).backend is Backend.nccl


def test_one_node_groups_never_need_the_fabric_or_rocenante():
    recipe = Recipe.model_validate(
        {"name": "q", "engine": "llama.cpp", "model": "m.gguf", "collectives": "rocenante"}
    )
    launch = build_group("q-1", recipe, ["laptop"], Fabric())
    assert launch.ranks[0].env == llamacpp.ENGINE_ENV  # the engine's own, no fabric variables


def test_warnings_follow_nvidias_topology_advice():
    ring = sparks(8, FabricSettings(topology=Topology.ring))
    assert fabric_warnings(ring, 4, Backend.nccl) == []
    assert "NVIDIA advises a switch beyond 4 nodes" in fabric_warnings(ring, 8, Backend.nccl)[0]
    assert "RoCEnante suits switched fabrics" in fabric_warnings(ring, 2, Backend.rocenante)[0]
    assert fabric_warnings(sparks(8), 8, Backend.rocenante) == []


def test_recipe_env_wins_over_the_fabric():
    recipe = Recipe.model_validate({
        "name": "t", "engine": "torchrun", "parallelism": {"data": 2}, "training": {"script": "t.py"},
        "env": {"NCCL_SOCKET_IFNAME": "=enp1s0f1np1", "NCCL_DEBUG": "INFO"},
    })  # fmt: skip
    env = build_group("t-1", recipe, nodes(2), sparks(2)).ranks[0].env
    assert env == {**FABRIC_ENV, "NCCL_SOCKET_IFNAME": "=enp1s0f1np1", "NCCL_DEBUG": "INFO"}
