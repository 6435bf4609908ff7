"""The published layout in one step: large and small replicas as one workload, and the gateway over them.

The published prototype ran on 8 nodes: 3 replicas of the large model on 2
nodes each, and 2 replicas of the small model on 1 node each. Its scaled-down
forms keep the shape: on 4 nodes one large replica on 2 nodes and 2 small on
1 each; on 2 nodes one of each, on a node each. ``layout_plan`` makes the
plan for the nodes given (2, 4 or 8, in order: the large replicas take the
first ones), with each recipe reshaped to its form (a large replica split
over its nodes by layers for llama.cpp, by tensor parallelism for vLLM,
SGLang and TRT-LLM).

``Layout`` does the rest through the orchestrator, as ``sparksync workload
start`` does: ``check`` reads the nodes and runs the memory check, refusing
with the numbers before anything starts; ``start`` starts every replica as
one workload (all or nothing). The gateway's config names the replicas by
their recipes (``switchyard-large``, ``switchyard-small``), so a gateway
follows them through restarts: ``gateway_config``. ``start_gateway`` launches
it as a workload on a node (the engines then listen beyond loopback, which
``layout_plan`` arranges when ``gateway_on_node`` is set); the CLI can also
serve it here instead.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sparksync.core.agents import NodeAgents
from sparksync.core.workloads.errors import PlanError
from sparksync.core.workloads.fabric_settings import load_fabric_settings
from sparksync.core.workloads.orchestrator import Orchestrator, Prepared, ProgressCallback
from sparksync.core.workloads.plan import Plan, plan_in_order
from sparksync.core.workloads.recipe import Engine, Recipe
from sparksync.core.workloads.running import WorkloadView
from sparksync.core.workloads.workload_store import WorkloadStore
from sparksync.switchyard.config import SwitchyardConfig, parse_config
from sparksync.switchyard.on_node import gateway_plan, gateway_recipe, node_config

LARGE_RECIPE, SMALL_RECIPE = "switchyard-large", "switchyard-small"
LABEL = "switchyard-layout"


@dataclass(frozen=True)
class LayoutForm:
    nodes: int
    large_replicas: int
    large_nodes: int  # per replica
    small_replicas: int
    small_nodes: int

    def describe(self) -> str:
        return (f"{self.large_replicas} x large on {self.large_nodes} node(s) + "
                f"{self.small_replicas} x small on {self.small_nodes} node(s)")  # fmt: skip


FORMS = {
    8: LayoutForm(8, 3, 2, 2, 1),  # as published
    4: LayoutForm(4, 1, 2, 2, 1),
    2: LayoutForm(2, 1, 1, 1, 1),
}


def form_for(count: int) -> LayoutForm:
    form = FORMS.get(count)
    if form is None:
        raise PlanError(f"the published layout takes 8 nodes (or its scaled-down forms, 4 or 2); {count} given: "
                        "choose 2, 4 or 8 nodes")  # fmt: skip
    return form


def shaped(recipe: Recipe, name: str, nodes: int, replicas: int, http_host: str | None = None) -> Recipe:
    """``recipe`` as ``replicas`` replicas of ``nodes`` nodes each, renamed ``name``."""
    if recipe.engine is Engine.llamacpp:
        split = {"tensor": 1, "pipeline": nodes}
    elif recipe.engine in (Engine.vllm, Engine.sglang, Engine.trtllm):
        split = {"tensor": nodes, "pipeline": 1}
    else:
        raise PlanError(f"recipe {recipe.name} ({recipe.engine.value}) does not serve a model: choose an inference "
                        "recipe (llama.cpp, vLLM, SGLang or TRT-LLM)")  # fmt: skip
    parallelism = {**recipe.parallelism.model_dump(), **split, "data": 1, "replicas": replicas}
    changes: dict = {"name": name, "parallelism": parallelism}
    if http_host is not None:
        changes["http_host"] = http_host
    return recipe.updated(**changes)


def layout_plan(large: Recipe, small: Recipe, nodes: Sequence[str],
                gateway_on_node: bool = False) -> tuple[Plan, dict[str, Recipe], LayoutForm]:  # fmt: skip
    """The plan for ``nodes`` (the large replicas on the first ones) and its two reshaped recipes.

    With ``gateway_on_node`` the engines listen on all addresses, so a gateway on
    another node reaches them (on loopback only that node could)."""
    if len(set(nodes)) != len(nodes):
        raise PlanError(f"a node is named twice in {', '.join(nodes)}")
    form = form_for(len(nodes))
    host = "0.0.0.0" if gateway_on_node else None
    big = shaped(large, LARGE_RECIPE, form.large_nodes, form.large_replicas, host)
    little = shaped(small, SMALL_RECIPE, form.small_nodes, form.small_replicas, host)
    return plan_in_order([big, little], list(nodes)), {big.name: big, little.name: little}, form


def gateway_config(recipes: Mapping[str, Recipe], policy: Mapping, port: int = 8400) -> SwitchyardConfig:
    """The gateway over the layout: pools that follow the two recipes' workloads, and ``policy``."""
    big, little = recipes[LARGE_RECIPE], recipes[SMALL_RECIPE]
    return parse_config({
        "listen": {"host": "127.0.0.1", "port": port},
        "pools": {"small": {"workload": SMALL_RECIPE, "model": served(little)},
                  "large": {"workload": LARGE_RECIPE, "model": served(big)}},
        "policy": {"small": "small", "large": "large", **policy},
    }, "the published layout's gateway config")  # fmt: skip


def served(recipe: Recipe) -> str:
    """The model name clients ask the engine for."""
    return recipe.served_name or recipe.model


class Layout:
    """Check, start and route the published layout through the nodes' agents (blocking: call from workers)."""

    def __init__(self, agents: NodeAgents, store: WorkloadStore | None = None,
                 on_progress: ProgressCallback | None = None):  # fmt: skip
        self.store = store if store is not None else WorkloadStore()
        self.orchestrator = Orchestrator(agents, self.store, fabric_settings=load_fabric_settings(),
                                         on_progress=on_progress)  # fmt: skip

    def check(self, plan: Plan, recipes: Mapping[str, Recipe]) -> Prepared:
        """Read the nodes and check that every replica fits in its nodes' free memory (MemoryFitError if not)."""
        return self.orchestrator.prepare(plan, recipes, LABEL)

    def start(self, prepared: Prepared, cancel: threading.Event | None = None) -> WorkloadView:
        return self.orchestrator.start(prepared, cancel)

    def start_gateway(self, config: SwitchyardConfig, node: str, addresses: Mapping[str, str],
                      program: Sequence[str] = ("sparksync",),
                      cancel: threading.Event | None = None) -> tuple[WorkloadView, SwitchyardConfig]:  # fmt: skip
        """The gateway as a workload on ``node``, over the replicas recorded now."""
        resolved = node_config(config, self.store.list(), node, addresses)
        recipe = gateway_recipe(resolved, list(program))
        prepared = self.orchestrator.prepare(gateway_plan(node), {recipe.name: recipe}, "switchyard")
        return self.orchestrator.start(prepared, cancel), resolved




@dataclass(frozen=True)
class LayoutRequest:
    """What the CLI or the app asks for: two recipes (with their changes), the nodes, the routing."""

    large: Recipe
    small: Recipe
    nodes: tuple[str, ...]
    policy: Mapping  # the gateway's policy section, less small and large
    gateway_node: str | None = None  # None: the gateway is served on this computer
    port: int = 8400

    def resolve(self) -> tuple[Plan, dict[str, Recipe], LayoutForm, SwitchyardConfig]:
        plan, recipes, form = layout_plan(self.large, self.small, self.nodes, self.gateway_node is not None)
        return plan, recipes, form, gateway_config(recipes, self.policy, self.port)


@dataclass
class LayoutStarted:
    replicas: WorkloadView
    config: SwitchyardConfig
    gateway: WorkloadView | None = None  # when it was started on a node


def start_layout(layout: Layout, request: LayoutRequest, prepared: Prepared, save_to: Path,
                 addresses: Mapping[str, str],
                 program: Sequence[str] = ("sparksync",),
                 cancel: threading.Event | None = None) -> LayoutStarted:  # fmt: skip
    """Start the checked replicas, write the gateway's config to ``save_to`` (a Path), and start the
    gateway on its node when the request names one. A gateway that fails to start leaves the replicas
    running (the error says so): they are one workload, stopped as one."""
    from sparksync.switchyard.config import save_config

    _, _, _, config = request.resolve()
    replicas = layout.start(prepared, cancel)
    save_config(config, save_to)
    started = LayoutStarted(replicas, config)
    if request.gateway_node is not None:
        started.gateway, _ = layout.start_gateway(config, request.gateway_node, addresses, program, cancel)
    return started
