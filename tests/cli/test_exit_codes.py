"""docs/exit-codes.md lists every exit code the CLI's errors carry, each with its class."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.fleet.problems import DEGRADED_EXIT, OFFLINE_EXIT

DOC = Path(__file__).resolve().parents[2] / "docs" / "exit-codes.md"
PACKAGES = ("sparksync.core", "sparksync.switchyard", "sparksync.cli")


def _error_classes() -> dict[str, int]:
    for package in PACKAGES:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, package + "."):
            importlib.import_module(info.name)
    found: dict[str, int] = {}
    pending = [SparkSyncError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if "exit_code" in cls.__dict__:
            found[cls.__name__] = cls.__dict__["exit_code"]
    return found


def _table() -> dict[int, str]:
    rows = re.findall(r"^\| (\d+) \| (.+)$", DOC.read_text(), re.MULTILINE)
    return {int(code): rest for code, rest in rows}


def test_every_error_class_with_its_own_exit_code_is_in_the_table():
    table = _table()
    missing = []
    for name, code in sorted(_error_classes().items()):
        if code not in table or f"`{name}`" not in table[code]:
            missing.append(f"{name} ({code})")
    assert not missing, f"add to docs/exit-codes.md: {', '.join(missing)}"


def test_node_states_and_the_full_cluster_have_codes_of_their_own():
    table = _table()
    assert OFFLINE_EXIT == 11 and "offline" in table[11]
    assert DEGRADED_EXIT == 16 and "degraded" in table[16]
    assert "cluster is full" in table[17]
    codes = _error_classes()
    assert codes["ClusterFullError"] == 17
    assert [name for name, code in codes.items() if code == 17] == ["ClusterFullError"]
