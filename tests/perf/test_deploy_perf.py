"""Pair and deploy to all 8 lab nodes from scratch (bundle cached), beside N x one node in the same run.

Nine lab nodes run real sshd. The anchor pairs and deploys to one node on its
own (its own registry, since a cluster holds eight); the measurement pairs
and deploys to the other eight at once, through the core as the CLI does.
The anchor times eight is what doing them one after another would cost.
Target (issue 3): all eight within 45 s.
"""

from __future__ import annotations

import time

import pytest

from sparksync.core.bundle import add_to_cache
from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.deploy.many import deploy_many, summary_table
from sparksync.core.deploy.model import DeployOptions
from sparksync.core.nodes.registry import Registry
from sparksync.core.ssh.secrets import SecretStore
from sparksync.core.ssh.transports import NodeTransports
from tests.core.deploy.lab_helpers import FAST, agent_processes, lab_bundle, pair_all, stop_lab_agents
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.perf.report import Report, assert_targets

pytestmark = [pytest.mark.perf, pytest.mark.lab, pytest.mark.timeout(600)]

NODES = 8
TARGET_S = 45.0
OPTIONS = DeployOptions(health_timeout_s=120.0, advertise=False)


def pair_and_deploy(ssh_lab, nodes, client_key, registry: Registry) -> tuple[float, list]:
    started = time.monotonic()
    names = pair_all(ssh_lab, client_key, nodes, registry)
    with NodeTransports(client_key, registry, dialer=ssh_lab.dialer, settings=FAST) as links:
        results = deploy_many(names, transports=links, registry=registry, options=OPTIONS)
    elapsed = time.monotonic() - started
    print(summary_table(results))
    assert all(r.ok for r in results), summary_table(results)
    return elapsed, results


def test_pair_and_deploy_eight_nodes_against_eight_times_one(
    ssh_lab_factory, real_keyring, tmp_path, tmp_path_factory, perf_out  # noqa: F811
):
    add_to_cache(lab_bundle(tmp_path_factory))  # built (or found) before the clock starts
    client_key = ClientKey.load_or_create(SecretStore())
    ssh_lab = ssh_lab_factory(NODES + 1)
    users = ssh_lab.users()
    try:
        one_s, _ = pair_and_deploy(
            ssh_lab, ssh_lab.nodes[NODES:], client_key, Registry(tmp_path / "one" / "nodes.json")
        )
        all_s, results = pair_and_deploy(ssh_lab, ssh_lab.nodes[:NODES], client_key, Registry())
    finally:
        stop_lab_agents(users)
    assert not [p.pid for user in users for p in agent_processes(user)]

    sequential = NODES * one_s
    report = Report("deploy_pair_8_nodes")
    report.figure("one_node_s", round(one_s, 2), "pair + deploy, one node alone", "s")
    report.figure("sequential_s", round(sequential, 2), f"anchor: {NODES} x one node", "s")
    report.figure("parallel_s", round(all_s, 2), f"pair + deploy, {NODES} nodes at once", "s")
    report.figure("ratio", round(all_s / sequential, 3), "parallel / sequential")
    report.figure("slowest_node_s", round(max(r.seconds for r in results), 2), "slowest node's deploy", "s")
    report.check(f"{NODES} nodes within {TARGET_S:g} s", all_s <= TARGET_S, f"{all_s:.1f} s")
    report.publish(perf_out)
    assert_targets(report)
