"""docs/recipes.md shows what the code does: every example recipe is valid and produces the commands shown."""

from __future__ import annotations

import json
import re
import shlex

from sparksync.core.workloads.builtin_recipes import builtin_recipes
from sparksync.core.workloads.commands import GroupContext, build_ranks
from sparksync.core.workloads.recipe import Engine, Recipe
from tests.packaging.debcache import ROOT

RECIPES_DOC = ROOT / "docs" / "recipes.md"
EXAMPLE = re.compile(r"```json\n(.*?)```\s*```text\n(.*?)```", re.DOTALL)


def _examples() -> list[tuple[dict, list[str]]]:
    text = RECIPES_DOC.read_text()
    return [(json.loads(recipe), commands.strip().splitlines()) for recipe, commands in EXAMPLE.findall(text)]


def _commands(recipe: Recipe) -> list[str]:
    """The doc's convention: nodes spark-1, spark-2, ... at 192.168.100.10, .11, ..."""
    nodes = tuple(f"spark-{i + 1}" for i in range(recipe.parallelism.nodes_per_replica))
    ips = {node: f"192.168.100.{10 + i}" for i, node in enumerate(nodes)}
    ranks = build_ranks(GroupContext(group=recipe.name, recipe=recipe, nodes=nodes, ips=ips))
    return [f"{launch.node}: {shlex.join(launch.argv)}" for launch in ranks]


def test_every_engine_has_a_worked_example():
    engines = {Recipe.model_validate(recipe).engine for recipe, _ in _examples()}
    assert engines == set(Engine)


def test_each_example_produces_the_commands_the_page_shows():
    for recipe, shown in _examples():
        assert _commands(Recipe.model_validate(recipe)) == shown, recipe["name"]


def test_the_page_names_every_built_in_recipe():
    text = RECIPES_DOC.read_text()
    assert [name for name in builtin_recipes() if f"`{name}`" not in text] == []
