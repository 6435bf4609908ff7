"""The recipes SparkSync ships, one JSON file each, in the same format as users' own files.

Most are templates: fields written as '<...>' (the model, a checkout) must be
filled in before launch, and launching one unfilled says which.
"""

from __future__ import annotations

from importlib import resources

from sparksync.core.workloads.recipe import Recipe

SUFFIX = ".json"


def builtin_recipes() -> dict[str, Recipe]:
    """Every built-in recipe by name."""
    found = {}
    for entry in sorted(resources.files(__name__).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(SUFFIX):
            recipe = Recipe.model_validate_json(entry.read_bytes())
            found[recipe.name] = recipe
    return found
