"""Workloads, client side: recipes, placement plans, the launch per rank, and running them through the agents.

- ``workload_control``: ``WorkloadControl``, the workload operations both faces call (start, stop,
  list, watch, logs, engines);
- ``recipe`` / ``recipe_files`` / ``plan`` / ``launch_request`` / ``launch_choice``: what to run, where;
- ``launches`` / ``launch_spec`` / ``commands``: the exact ``RankLaunch`` per process;
- ``orchestrator``: every rank started by its node's agent, stage by stage, all or nothing;
- ``running`` / ``workload_store``: a started workload's ranks across nodes, and its record here;
- ``reach``: an engine's HTTP API from here (through a tunnel, or as it is on this computer);
- ``engine_install``: llama.cpp built on a node or on this computer;
- ``fabric`` / ``memory_fit`` / ``baseline`` / ``training_scaling``: the checks and figures around them.

No Qt. Any node's agent, this computer's too, is reached through the fleet (``NodeAgents``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_exports

if TYPE_CHECKING:
    from sparksync.core.workloads.launch_request import apply_overrides
    from sparksync.core.workloads.recipe import INFERENCE_ENGINES
    from sparksync.core.workloads.workload_control import WorkloadControl, WorkloadRow
    from sparksync.core.workloads.running import DEFAULT_STOP_GRACE_S, RankView, WorkloadTokens, WorkloadView
    from sparksync.core.workloads.orchestrator import (
        Orchestrator,
        Prepared,
        Progress,
        ProgressCallback,
        WorkloadCancelled,
        WorkloadStartError,
    )
    from sparksync.core.workloads.errors import (
        MemoryFitError,
        PlanError,
        RecipeError,
        RecipeNotFoundError,
        WorkloadError,
    )
    from sparksync.core.workloads.launch_choice import LaunchChoice, fit_lines, groups_of
    from sparksync.core.workloads.launch_request import parse_settings, resolve
    from sparksync.core.workloads.last_workload import Launched
    from sparksync.core.workloads.plan import Group, Plan
    from sparksync.core.workloads.recipe import Engine, Recipe
    from sparksync.core.workloads.recipe_files import all_recipes, find_recipe
    from sparksync.core.workloads.workload_store import Endpoint, RankRef, WorkloadRecord, WorkloadStore
    from sparksync.core.workloads.reach import (
        WILDCARDS,
        DirectReach,
        Reach,
        TunnelReach,
        direct_url,
        workload_endpoints,
    )
    from sparksync.core.workloads.engine_install import (
        FLAVOURS,
        EngineInstallError,
        InstallProgress,
        install_engine,
    )
    from sparksync.core.workloads.local_model import (
        EngineHere,
        Generated,
        engine_here,
        generate_for,
        start_here,
        url_of,
    )
    from sparksync.core.workloads.fabric_settings import load_fabric_settings
    from sparksync.core.workloads.baseline import Baseline, BaselineStore
    from sparksync.core.workloads.training_scaling import GroupScaling

# name -> the module that holds it
_WHERE = {
    "apply_overrides": "launch_request",
    "INFERENCE_ENGINES": "recipe",
    "WorkloadControl": "workload_control",
    "WorkloadRow": "workload_control",
    "WorkloadView": "running",
    "RankView": "running",
    "WorkloadTokens": "running",
    "DEFAULT_STOP_GRACE_S": "running",
    "Orchestrator": "orchestrator",
    "Prepared": "orchestrator",
    "Progress": "orchestrator",
    "ProgressCallback": "orchestrator",
    "WorkloadStartError": "orchestrator",
    "WorkloadCancelled": "orchestrator",
    "WorkloadError": "errors",
    "MemoryFitError": "errors",
    "PlanError": "errors",
    "RecipeError": "errors",
    "RecipeNotFoundError": "errors",
    "LaunchChoice": "launch_choice",
    "fit_lines": "launch_choice",
    "groups_of": "launch_choice",
    "parse_settings": "launch_request",
    "resolve": "launch_request",
    "Launched": "last_workload",
    "Plan": "plan",
    "Group": "plan",
    "Recipe": "recipe",
    "Engine": "recipe",
    "all_recipes": "recipe_files",
    "find_recipe": "recipe_files",
    "WorkloadStore": "workload_store",
    "WorkloadRecord": "workload_store",
    "RankRef": "workload_store",
    "Endpoint": "workload_store",
    "Reach": "reach",
    "TunnelReach": "reach",
    "DirectReach": "reach",
    "WILDCARDS": "reach",
    "direct_url": "reach",
    "workload_endpoints": "reach",
    "open_workload": "reach",
    "FLAVOURS": "engine_install",
    "InstallProgress": "engine_install",
    "EngineInstallError": "engine_install",
    "install_engine": "engine_install",
    "EngineHere": "local_model",
    "Generated": "local_model",
    "engine_here": "local_model",
    "generate_for": "local_model",
    "start_here": "local_model",
    "url_of": "local_model",
    "load_fabric_settings": "fabric_settings",
    "BaselineStore": "baseline",
    "Baseline": "baseline",
    "GroupScaling": "training_scaling",
}
__all__ = [
    "apply_overrides",
    "INFERENCE_ENGINES",
    "Baseline",
    "BaselineStore",
    "DEFAULT_STOP_GRACE_S",
    "DirectReach",
    "Endpoint",
    "Engine",
    "EngineHere",
    "EngineInstallError",
    "FLAVOURS",
    "Generated",
    "Group",
    "GroupScaling",
    "InstallProgress",
    "LaunchChoice",
    "Launched",
    "MemoryFitError",
    "Orchestrator",
    "Plan",
    "PlanError",
    "Prepared",
    "Progress",
    "ProgressCallback",
    "RankRef",
    "RankView",
    "Reach",
    "Recipe",
    "RecipeError",
    "RecipeNotFoundError",
    "TunnelReach",
    "WILDCARDS",
    "WorkloadCancelled",
    "WorkloadControl",
    "WorkloadError",
    "WorkloadRecord",
    "WorkloadRow",
    "WorkloadStartError",
    "WorkloadStore",
    "WorkloadTokens",
    "WorkloadView",
    "all_recipes",
    "direct_url",
    "engine_here",
    "find_recipe",
    "fit_lines",
    "generate_for",
    "groups_of",
    "install_engine",
    "load_fabric_settings",
    "parse_settings",
    "resolve",
    "start_here",
    "url_of",
    "workload_endpoints",
    "open_workload",
]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
