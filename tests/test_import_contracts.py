"""The import contracts in pyproject.toml bite: each refuses an import that crosses its layer.

`make lint` runs them on the real tree; here they run on a copy of it, once as
it is (every contract kept) and once with one offending module per contract.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

# Each offender's source, and the line of the report that names its crossing.
OFFENDERS = {
    "sparksync/core/offender_face.py": (
        "import sparksync.gui.theme\n",
        "sparksync.core is not allowed to import sparksync.gui",
    ),
    "sparksync/gui/offender_cli.py": (
        "import sparksync.cli.main\n",
        "sparksync.gui is not allowed to import sparksync.cli",
    ),
    "sparksync/extra.py": ("", "- sparksync.extra"),  # every top-level part has its layer
    "sparksync/gui/offender_module.py": (  # a face takes the core's names from the package
        "from sparksync.core.fleet.fleet import Fleet\n",
        "sparksync.gui.offender_module -> sparksync.core.fleet.fleet",
    ),
    "sparksync/core/offender_qt.py": (
        "from PySide6 import QtCore\n",
        "- sparksync.core.offender_qt -> PySide6",
    ),
    "agent/sparksync_agent/supervisor/offender.py": (
        "import sparksync.core.base.paths\n",
        "sparksync_agent.supervisor.offender -> sparksync.core.base.paths",
    ),
    "sparksync/core/offender_daemon.py": (
        "from sparksync_agent.daemon import serve\n",
        "sparksync.core.offender_daemon -> sparksync_agent.daemon",
    ),
    "sparksync/core/offender_wire.py": (  # wire models come from the package, never its files
        "from sparksync_agent.protocol.base import WireModel\n",
        "sparksync.core.offender_wire -> sparksync_agent.protocol.base",
    ),
    "agent/sparksync_agent/protocol/offender.py": (
        "from sparksync_agent.runtime import AgentRuntime\n",
        "sparksync_agent.protocol is not allowed to import sparksync_agent.runtime",
    ),
    "agent/sparksync_agent/newpart.py": ("", "- sparksync_agent.newpart"),
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The client, the agent and pyproject.toml, laid out as in the repository."""
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "sparksync", tmp_path / "sparksync", ignore=skip)
    shutil.copytree(ROOT / "agent" / "sparksync_agent", tmp_path / "agent" / "sparksync_agent", ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    # The copy comes first on the path, before the installed (editable) packages.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "agent")])}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(tree / "pyproject.toml")],
        cwd=tree, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_tree_as_it_is_keeps_every_contract(tree: Path) -> None:
    result = lint_imports(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 6 kept, 0 broken." in result.stdout


def test_each_contract_refuses_an_import_across_its_layer(tree: Path) -> None:
    for path, (source, _) in OFFENDERS.items():
        (tree / path).write_text(source)
    result = lint_imports(tree)
    report = result.stdout
    assert result.returncode == 1, report + result.stderr
    assert "Contracts: 0 kept, 6 broken." in report, report
    missing = [line for _, line in OFFENDERS.values() if line not in report]
    assert not missing, f"not reported: {missing}\n{report}"
