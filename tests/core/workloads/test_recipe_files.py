"""Users' recipe files: round trips, newer formats refused, broken files kept untouched."""

from __future__ import annotations

import json
import stat

import pytest

from sparksync.core.planner.fit import FitOptions
from sparksync.core.planner.model import ModelSpec
from sparksync.core.workloads.builtin_recipes import builtin_recipes
from sparksync.core.workloads.errors import FutureRecipeVersionError, RecipeFileError, RecipeNotFoundError
from sparksync.core.workloads.recipe import Recipe
from sparksync.core.workloads.recipe_files import (
    all_recipes,
    delete_recipe,
    find_recipe,
    load_recipe_file,
    load_user_recipes,
    recipe_path,
    recipes_dir,
    save_recipe,
)

FULL = Recipe.model_validate({
    "name": "qwen-ngc", "description": "Qwen over 2 Sparks in NGC's vLLM", "engine": "vllm",
    "model": "Qwen/Qwen3-32B", "served_name": "qwen", "parallelism": {"tensor": 2, "replicas": 3},
    "ports": {"http": 8001, "ray": 6380}, "extra_args": ["--max-model-len", "8192"],
    "env": {"HF_TOKEN": "hf_secret"}, "readiness": {"kind": "http", "path": "/v1/models"},
    "tokens": {"kind": "prometheus", "decode_counter": "vllm:generation_tokens_total"},
    "container": {"image": "nvcr.io/nvidia/vllm:25.11-py3", "mounts": ["/data/hf:/root/.cache/huggingface"]},
    "collectives": "rocenante",
    "memory": {"model": ModelSpec(params=32e9, quant="nvfp4", layers=64, kv_heads=8, head_dim=128).model_dump(),
               "options": FitOptions(context=32768, concurrency=4).model_dump()},
})  # fmt: skip


def test_a_saved_recipe_reads_back_equal():
    path = save_recipe(FULL)
    assert path == recipes_dir() / "qwen-ngc.json"
    assert load_recipe_file(path) == FULL
    assert find_recipe("qwen-ngc") == FULL


def test_the_file_is_private_json_with_the_version_first_and_no_defaults():
    path = save_recipe(Recipe.model_validate({"name": "small", "engine": "llama.cpp", "model": "/m.gguf"}))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {
        "version": 1,
        "name": "small",
        "engine": "llama.cpp",
        "model": "/m.gguf",
    }
    assert path.read_text().startswith('{\n  "version": 1,')
    assert [p.name for p in recipes_dir().iterdir()] == ["small.json"]  # no temp file left behind


def test_a_newer_format_is_refused_by_name_and_version():
    path = recipe_path("future")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 2, "name": "future", "engine": "vllm", "placement_hints": {}}))
    with pytest.raises(FutureRecipeVersionError) as caught:
        load_recipe_file(path)
    message = str(caught.value)
    assert str(path) in message and "format 2" in message and "reads format 1" in message
    assert "Upgrade SparkSync" in message


def test_a_corrupt_file_is_kept_skipped_and_never_overwritten():
    save_recipe(Recipe.model_validate({"name": "good", "engine": "llama.cpp", "model": "/m.gguf"}))
    broken = recipe_path("broken")
    broken.write_bytes(b'{"version": 1, "name": "broken",\n  "engine": ')
    with pytest.raises(RecipeFileError, match=r"broken.json is not valid JSON \(line 2, column 13\)"):
        load_recipe_file(broken)

    recipes, problems = load_user_recipes()
    assert list(recipes) == ["good"] and len(problems) == 1 and "broken.json" in str(problems[0])

    with pytest.raises(RecipeFileError, match="not valid JSON"):
        save_recipe(Recipe.model_validate({"name": "broken", "engine": "llama.cpp", "model": "/m.gguf"}))
    assert broken.read_bytes() == b'{"version": 1, "name": "broken",\n  "engine": '


def test_a_file_with_bad_content_says_what_is_wrong_and_is_kept():
    path = recipe_path("odd")
    path.parent.mkdir(parents=True)
    text = json.dumps({"version": 1, "name": "odd", "engine": "vllm", "parallelism": {"tensor": 0}})
    path.write_text(text)
    with pytest.raises(RecipeFileError, match=r"odd.json is not valid: parallelism.tensor: .* keeps it"):
        load_recipe_file(path)
    with pytest.raises(RecipeFileError):
        save_recipe(Recipe.model_validate({"name": "odd", "engine": "vllm"}))
    assert path.read_text() == text


def test_a_future_file_is_not_overwritten_either():
    path = recipe_path("future")
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 7, "name": "future"}')
    with pytest.raises(FutureRecipeVersionError):
        save_recipe(Recipe.model_validate({"name": "future", "engine": "vllm"}))
    assert path.read_text() == '{"version": 7, "name": "future"}'


def test_user_recipes_shadow_builtins_of_the_same_name():
    mine = Recipe.model_validate({"name": "llamacpp-single", "engine": "llama.cpp", "model": "/mine.gguf"})
    assert find_recipe("llamacpp-single") == builtin_recipes()["llamacpp-single"]
    save_recipe(mine)
    assert find_recipe("llamacpp-single") == mine
    recipes, problems = all_recipes()
    assert recipes["llamacpp-single"] == mine and "vllm-ray" in recipes and problems == []


def test_unknown_names_and_deletes():
    with pytest.raises(
        RecipeNotFoundError, match=r"no recipe named 'nope'. Known recipes: custom, llamacpp-rpc"
    ):
        find_recipe("nope")
    save_recipe(Recipe.model_validate({"name": "temp", "engine": "vllm"}))
    delete_recipe("temp")
    with pytest.raises(RecipeNotFoundError, match="built-ins cannot be deleted"):
        delete_recipe("vllm-ray")
    with pytest.raises(RecipeFileError, match="is not a recipe name"):
        recipe_path("../escape")
