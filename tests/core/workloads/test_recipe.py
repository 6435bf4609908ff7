"""Recipes: validation rules, and the built-ins shipped as files."""

from __future__ import annotations

from importlib import resources

import pytest
from pydantic import ValidationError

from sparksync.core.workloads.builtin_recipes import builtin_recipes
from sparksync.core.workloads.errors import RecipeError
from sparksync.core.workloads.fabric import Fabric
from sparksync.core.workloads.launches import build_group
from sparksync.core.workloads.recipe import Engine, Recipe
from tests.core.workloads.fakes import nodes, sparks

EXPECTED_BUILTINS = {
    "llamacpp-single", "llamacpp-rpc", "vllm-ray", "vllm-ray-ngc", "sglang-multinode", "trtllm-mpirun",
    "torchrun", "nanochat-base-train", "custom",
}  # fmt: skip


def test_every_builtin_file_loads_and_is_named_like_its_file():
    recipes = builtin_recipes()
    assert set(recipes) == EXPECTED_BUILTINS
    files = {e.name for e in resources.files("sparksync.core.workloads.builtin_recipes").iterdir()}
    assert {f"{name}.json" for name in recipes} <= files
    assert {r.engine for r in recipes.values()} == set(Engine)


def filled(recipe: Recipe) -> Recipe:
    """A built-in with its '<...>' fields given values, as a user would."""
    data = recipe.model_dump()
    training = data["training"]
    if data["model"].startswith("<"):
        data["model"] = "/models/m"
    if training["script"].startswith("<"):
        training["script"] = "train.py"
    if (training["workdir"] or "").startswith("<"):
        training["workdir"] = "/home/me/nanochat"
    data["custom"]["argv"] = ["/bin/true" if a.startswith("<") else a for a in data["custom"]["argv"]]
    return Recipe.model_validate(data)


@pytest.mark.parametrize("name", sorted(EXPECTED_BUILTINS))
def test_every_builtin_is_a_template_that_launches_once_filled(name):
    recipe = builtin_recipes()[name]
    size = recipe.nodes_per_replica
    with pytest.raises(RecipeError, match="is a template: fill in"):
        build_group(f"{name}-1", recipe, nodes(size), sparks(size))
    ranks = build_group(f"{name}-1", filled(recipe), nodes(size), sparks(size)).ranks
    assert ranks and all(r.argv for r in ranks)


def test_builtin_multi_node_recipes_span_two_nodes():
    recipes = builtin_recipes()
    assert recipes["llamacpp-single"].nodes_per_replica == 1
    for name in EXPECTED_BUILTINS - {"llamacpp-single", "custom"}:
        assert recipes[name].nodes_per_replica == 2, name


def test_a_misspelt_field_is_an_error_not_ignored():
    with pytest.raises(ValidationError, match="tensr"):
        Recipe.model_validate({"name": "r", "engine": "vllm", "parallelism": {"tensr": 2}})


@pytest.mark.parametrize(
    "fields, reason",
    [
        (
            {"engine": "llama.cpp", "parallelism": {"tensor": 2}},
            "set parallelism.pipeline to the number of nodes",
        ),
        ({"engine": "sglang", "container": {"image": "x"}}, "containers are supported for vLLM only"),
        ({"engine": "vllm", "parallelism": {"data": 2}}, "use replicas, not data parallelism"),
        ({"engine": "vllm", "version": 2}, "format 2 is newer than this SparkSync reads"),
        ({"engine": "vllm", "env": {"BAD-NAME": "1"}}, "not environment variable names: 'BAD-NAME'"),
        ({"engine": "vllm", "readiness": {"kind": "log", "pattern": "("}}, "not a valid regular expression"),
        ({"engine": "torchrun", "tokens": {"kind": "log", "pattern": "tok/sec"}}, "named group"),
        ({"engine": "vllm", "name": "no spaces"}, "is not a recipe name"),
    ],
)
def test_recipe_rules(fields, reason):
    with pytest.raises(ValidationError, match=reason):
        Recipe.model_validate({"name": "r", **fields})


def test_build_turns_validation_into_a_readable_recipe_error():
    with pytest.raises(RecipeError, match=r"recipe 'r' is not valid: parallelism.tensor: Input should be"):
        Recipe.build(name="r", engine="vllm", parallelism={"tensor": 0})


def test_an_inference_recipe_without_a_model_is_refused_at_launch():
    recipe = Recipe.model_validate({"name": "r", "engine": "vllm"})
    with pytest.raises(RecipeError, match="recipe 'r' names no model"):
        build_group("r-1", recipe, ["a"], Fabric())


def test_a_recipe_readiness_override_probes_the_engines_http_port():
    recipe = Recipe.model_validate({
        "name": "r", "engine": "llama.cpp", "model": "m.gguf", "http_host": "0.0.0.0",
        "ports": {"http": 9000}, "readiness": {"kind": "http", "path": "/v1/models", "timeout_s": 30},
    })  # fmt: skip
    (launch,) = build_group("r-1", recipe, ["a"], Fabric()).ranks
    assert launch.readiness.model_dump(include={"kind", "host", "port", "path", "timeout_s"}) == {
        "kind": "http",
        "host": "127.0.0.1",
        "port": 9000,
        "path": "/v1/models",
        "timeout_s": 30.0,
    }
    assert launch.argv[3:5] == ["--host", "0.0.0.0"]
