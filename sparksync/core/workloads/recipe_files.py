"""Users' recipes: one JSON file each in ``<config dir>/recipes/<name>.json``.

Why JSON: the standard library reads and writes it on every Python SparkSync
supports (TOML would need a writer package, and ``tomllib`` only reads, from
3.11; YAML would need PyYAML), pydantic round-trips it exactly, and the node
registry (``nodes.json``) already uses it. JSON has no comments, so a recipe
carries its own ``description``.

Rules users rely on:

- writes are atomic (temp file, fsync, rename) and private (0600: a recipe's
  ``env`` may hold a token);
- a file written by a newer SparkSync is refused by name and version, never
  misread;
- a file that cannot be read is kept as it is: it is reported, skipped when
  listing, and never overwritten by a save.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sparksync_agent.atomic import write_atomic

from sparksync.core.base.paths import config_dir, ensure_dir
from sparksync.core.workloads.builtin_recipes import builtin_recipes
from sparksync.core.workloads.errors import (
    FutureRecipeVersionError,
    RecipeFileError,
    RecipeNotFoundError,
    describe_validation,
)
from sparksync.core.workloads.recipe import NAME_RE, RECIPE_VERSION, Recipe

log = logging.getLogger(__name__)

RECIPES_DIR = "recipes"
SUFFIX = ".json"
FILE_MODE = 0o600


def recipes_dir() -> Path:
    return config_dir() / RECIPES_DIR


def recipe_path(name: str) -> Path:
    if not NAME_RE.match(name):
        raise RecipeFileError(f"{name!r} is not a recipe name: use letters, digits, '.', '_' or '-'.")
    return recipes_dir() / f"{name}{SUFFIX}"


def load_recipe_file(path: Path) -> Recipe:
    """Read one recipe file; refuse a newer format or a broken file, naming it."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RecipeFileError(f"cannot read the recipe file {path} ({exc.strerror}).") from None
    data = _parse(raw, path)
    _check_version(data, path)
    try:
        return Recipe.model_validate(data)
    except ValidationError as exc:
        raise RecipeFileError(
            describe_validation(exc, f"the recipe file {path}") + " Fix it; SparkSync keeps it as it is."
        ) from None


def load_user_recipes() -> tuple[dict[str, Recipe], list[RecipeFileError]]:
    """Every readable user recipe by name, and the problems with the others (which are kept)."""
    folder = recipes_dir()
    recipes: dict[str, Recipe] = {}
    problems: list[RecipeFileError] = []
    for path in sorted(folder.glob(f"*{SUFFIX}")) if folder.is_dir() else []:
        try:
            recipe = load_recipe_file(path)
        except RecipeFileError as exc:
            log.warning("skipping recipe file: %s", exc)
            problems.append(exc)
            continue
        recipes[recipe.name] = recipe
    return recipes, problems


def all_recipes() -> tuple[dict[str, Recipe], list[RecipeFileError]]:
    """Built-ins, then the user's recipes (a user recipe with a built-in's name wins)."""
    user, problems = load_user_recipes()
    return {**builtin_recipes(), **user}, problems


def find_recipe(name: str) -> Recipe:
    path = recipe_path(name)
    if path.exists():
        return load_recipe_file(path)
    builtin = builtin_recipes().get(name)
    if builtin is None:
        known = ", ".join(sorted(all_recipes()[0]))
        raise RecipeNotFoundError(f"no recipe named {name!r}. Known recipes: {known}.")
    return builtin


def save_recipe(recipe: Recipe) -> Path:
    """Write (or replace) the user's recipe file, atomically; never over a file it cannot read."""
    path = recipe_path(recipe.name)
    if path.exists():
        load_recipe_file(path)  # raises for a corrupt or newer file: it is kept, not overwritten
    ensure_dir(recipes_dir())
    write_atomic(path, dump_recipe(recipe), mode=FILE_MODE)
    return path


def delete_recipe(name: str) -> None:
    path = recipe_path(name)
    if not path.exists():
        raise RecipeNotFoundError(f"there is no saved recipe named {name!r} (built-ins cannot be deleted).")
    path.unlink()


def dump_recipe(recipe: Recipe) -> str:
    """The file's text: the version first, then only what differs from the defaults."""
    body = recipe.model_dump(mode="json", exclude_defaults=True)
    body.pop("version", None)
    return json.dumps({"version": recipe.version, **body}, indent=2, ensure_ascii=False) + "\n"


def _parse(raw: bytes, path: Path) -> Any:
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise RecipeFileError(
            f"the recipe file {path} is not valid JSON{where}. Fix it or delete it; SparkSync keeps it "
            "as it is."
        ) from None


def _check_version(data: Any, path: Path) -> None:
    if not isinstance(data, dict):
        raise RecipeFileError(
            f"the recipe file {path} does not hold a recipe (a JSON object). Fix or delete it."
        )
    version = data.get("version", RECIPE_VERSION)
    if isinstance(version, int) and not isinstance(version, bool) and version > RECIPE_VERSION:
        raise FutureRecipeVersionError(
            f"the recipe file {path} is format {version}, written by a newer SparkSync; this one reads "
            f"format {RECIPE_VERSION}. Upgrade SparkSync to use it (the file is left untouched)."
        )
