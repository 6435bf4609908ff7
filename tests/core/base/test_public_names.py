"""The core's public surface: each package lists its names, and the faces import only those.

The faces (``sparksync.gui``, ``sparksync.cli``) import the core through its
packages (``from sparksync.core.fleet import Fleet``), never their modules;
import-linter refuses the latter in ``make lint``. Here: every listed name
resolves, no name hides a module of the same name (a lazy export would then
turn into the module once something imports it), and the surface the faces
use is printed for the record.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import sparksync.core

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = sorted(m.name for m in pkgutil.iter_modules(sparksync.core.__path__) if m.ispkg)


def _core_modules_imported_by(face: str) -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "sparksync" / face).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found.update(name for name in names if name.startswith("sparksync.core"))
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_every_listed_name_resolves_and_none_is_a_module_name(package: str) -> None:
    module = importlib.import_module(f"sparksync.core.{package}")
    exported = list(module.__all__)
    assert exported, f"sparksync.core.{package} lists no public names"
    for name in exported:
        getattr(module, name)  # raises for a name whose module does not hold it
    modules = {m.name for m in pkgutil.iter_modules(module.__path__)}
    assert not set(exported) & modules


@pytest.mark.parametrize("face", ["gui", "cli"])
def test_the_faces_import_the_core_only_through_its_packages(face: str) -> None:
    imported = _core_modules_imported_by(face)
    print(f"\nsparksync.{face} imports {len(imported)} core modules: {', '.join(sorted(imported))}")
    assert imported, "the scan found no imports: it is looking in the wrong place"
    assert imported <= {f"sparksync.core.{p}" for p in PACKAGES}
