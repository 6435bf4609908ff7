"""What a user asks for at launch (a recipe, nodes or a plan file, a few overrides), as recipes and a plan.

Shared by the CLI and the GUI so both read ``--set llamacpp.threads=2`` and
``--nodes a,b,c,d`` the same way. With ``--nodes`` and a recipe of one
replica, a llama.cpp recipe is split over all the given nodes (pipeline =
node count) and a torchrun recipe runs data parallel on all of them, so
``sparksync workload start llamacpp-rpc --nodes a,b,c,d`` just works.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sparksync.core.workloads.errors import PlanError, RecipeError, describe_validation
from sparksync.core.workloads.plan import Plan, plan_in_order
from sparksync.core.workloads.recipe import Engine, Recipe
from sparksync.core.workloads.recipe_files import find_recipe


def parse_settings(pairs: Sequence[str]) -> dict[str, Any]:
    """``key.sub=value`` pairs as a nested dict; a value is read as JSON when it parses, else text."""
    nested: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise RecipeError(f"{pair!r} is not KEY=VALUE (e.g. llamacpp.threads=2).")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        node = nested
        *parents, leaf = key.strip().split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def apply_overrides(recipe: Recipe, overrides: Mapping[str, Any]) -> Recipe:
    """The recipe with ``overrides`` merged in (nested fields merge), validated again."""
    if not overrides:
        return recipe
    return Recipe.build(**_merge(recipe.model_dump(), overrides))


def _merge(base: dict[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def fit_to_nodes(recipe: Recipe, count: int) -> Recipe:
    """A one-replica llama.cpp or torchrun recipe stretched to ``count`` nodes; others unchanged."""
    par = recipe.parallelism
    if par.replicas != 1 or count == recipe.nodes_per_replica:
        return recipe
    if recipe.engine is Engine.llamacpp:
        return recipe.updated(parallelism={**par.model_dump(), "pipeline": count})
    if recipe.engine is Engine.torchrun:
        return recipe.updated(parallelism={**par.model_dump(), "data": count})
    return recipe


def load_plan(path: Path) -> Plan:
    try:
        return Plan.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise PlanError(f"cannot read the plan file {path} ({exc.strerror}).") from None
    except ValidationError as exc:
        raise PlanError(describe_validation(exc, f"the plan file {path}")) from None


def resolve(
    recipe_name: str,
    nodes: Sequence[str] = (),
    plan_file: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[Plan, dict[str, Recipe]]:
    """The plan and every recipe it names; overrides apply to ``recipe_name``."""
    recipe = apply_overrides(find_recipe(recipe_name), overrides or {})
    if plan_file is not None:
        plan = load_plan(plan_file)
        recipes = {name: find_recipe(name) for name in {g.recipe for g in plan.groups}}
        recipes[recipe.name] = recipe
        return plan, recipes
    if not nodes:
        raise PlanError("say where to run it: --nodes a,b,... or --plan FILE.")
    recipe = fit_to_nodes(recipe, len(nodes))
    return plan_in_order([recipe], list(nodes)), {recipe.name: recipe}
