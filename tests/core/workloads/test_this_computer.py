"""This computer in plans, launch choices and reaches: one name, its own loopback, a port of its own."""

from __future__ import annotations

import os

import pytest

from sparksync.core.workloads import DirectReach, Endpoint, Group, Plan, TunnelReach, direct_url, resolve
from sparksync.core.workloads.launch_choice import LaunchChoice, resolve_choice
from sparksync.core.workloads.local_model import choice_here
from sparksync.core.workloads.recipe_files import all_recipes


def test_local_in_a_plan_or_on_the_command_line_is_this_computer():
    assert Group(recipe="r", nodes=["local"]).nodes == ["this computer"]
    plan, _recipes = resolve("llamacpp-single", ["Local"], overrides={"model": "/m.gguf"})
    assert plan.nodes() == ["this computer"]
    restored = Plan.model_validate_json(Plan(groups=[Group(recipe="r", nodes=["local", "n1"])]).model_dump_json())
    assert restored.nodes() == ["this computer", "n1"]


def test_the_demo_choice_runs_llamacpp_single_here_on_a_port_of_its_own():
    choice = choice_here("/models/demo.gguf", port=18080)
    assert (choice.recipe, choice.nodes, choice.http_port) == ("llamacpp-single", ["this computer"], 18080)
    plan, recipes = resolve_choice(choice, all_recipes()[0])
    [recipe] = recipes.values()
    assert plan.nodes() == ["this computer"] and recipe.ports.http == 18080 and recipe.model == "/models/demo.gguf"
    assert recipe.llamacpp.context == 4096 and 1 <= recipe.llamacpp.threads <= max(1, os.cpu_count() // 2)
    assert LaunchChoice.model_validate(choice.model_dump()) == choice  # kept by the tray's last launch


class NoSsh:
    @property
    def transports(self):
        raise AssertionError("an engine on this computer needs no SSH tunnel")


def test_an_engine_on_this_computer_is_reached_as_it_is():
    here = Endpoint(group="g-1", node="this computer", host="127.0.0.1", port=18080, listen="127.0.0.1")
    with TunnelReach(NoSsh())(here) as url:
        assert url == "http://127.0.0.1:18080"
    with DirectReach({})(here) as url:
        assert url == "http://127.0.0.1:18080"  # no address needed for this computer
    wide = here.model_copy(update={"host": "0.0.0.0", "listen": "0.0.0.0"})
    with DirectReach({})(wide) as url:
        assert url == "http://127.0.0.1:18080"
    with pytest.raises(Exception, match="no address is known"):
        direct_url(wide, {})  # from a node, this computer's address would have to be known


def test_a_paired_nodes_loopback_engine_still_needs_a_tunnel():
    there = Endpoint(group="g-1", node="spark-1", host="127.0.0.1", port=8080, listen="127.0.0.1")
    with pytest.raises(Exception, match="only that node can reach"):
        direct_url(there, {"spark-1": "10.0.0.1"})


def test_opening_the_api_of_an_engine_here_never_makes_the_ssh_transports(tmp_path):
    # The Workloads panel's "Open API": for this computer's engine the fleet's SSH side (the
    # client key, the keyring) is never touched, so a slow or locked keyring cannot hold it up.
    from sparksync.core.workloads import Group, Plan, RankRef, WorkloadControl, WorkloadRecord, WorkloadStore

    here = Endpoint(group="g-1", node="this computer", host="127.0.0.1", port=18080, listen="127.0.0.1")
    record = WorkloadRecord(
        workload_id="w-here", recipes=["r"], plan=Plan(groups=[Group(recipe="r", nodes=["this computer"])]),
        ranks=[RankRef(node="this computer", name="r-1.0.llama-server", group="g-1", rank=0, role="llama-server")],
        endpoints=[here],
    )
    store = WorkloadStore(tmp_path / "workloads.json")
    store.add(record)
    control = WorkloadControl(NoSsh, store=store)
    [(endpoint, url)] = control.open_api("w-here")
    assert (endpoint, url) == (here, "http://127.0.0.1:18080")
    control.close_all_api()
