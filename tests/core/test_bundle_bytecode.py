"""The start-up bytecode wheel: what it holds, for which Python, and that Python accepts its files (no network)."""

from __future__ import annotations

import importlib.util
import marshal
import sys
import zipfile
from pathlib import Path

from sparksync.core.bundle.bytecode import BYTECODE_DISTRIBUTION, builds_for, make_bytecode_wheel, wheel_name
from sparksync_agent.protocol import AGENT_VERSION

HERE = f"{sys.version_info[0]}.{sys.version_info[1]}"
TAG = sys.implementation.cache_tag
CLI = b"import argparse\nVALUE = 42\n"


def agent_like_wheel(folder: Path) -> str:
    """A wheel with two modules the agent imports at start and one it never imports."""
    name = f"sparksync_agent-{AGENT_VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(folder / name, "w") as wheel:
        wheel.writestr("sparksync_agent/__init__.py", b"")
        wheel.writestr("sparksync_agent/cli.py", CLI)
        wheel.writestr("sparksync_agent/never_imported_at_start.py", b"X = 1\n")
        wheel.writestr(f"sparksync_agent-{AGENT_VERSION}.dist-info/METADATA", "Name: sparksync-agent\n")
    return name


def test_only_this_python_makes_bytecode_for_a_target(tmp_path):
    other = "3.10" if HERE != "3.10" else "3.12"
    assert builds_for(HERE) and not builds_for(other)
    wheel = agent_like_wheel(tmp_path)
    assert make_bytecode_wheel(other, tmp_path, [wheel]) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == [wheel]  # nothing written for another Python


def test_the_wheel_holds_checked_hash_bytecode_of_the_start_up_modules_only(tmp_path):
    wheel = agent_like_wheel(tmp_path)
    name = make_bytecode_wheel(HERE, tmp_path, [wheel])
    assert name == wheel_name(HERE) == f"{BYTECODE_DISTRIBUTION}-{AGENT_VERSION}-cp{HERE.replace('.', '')}-none-any.whl"
    with zipfile.ZipFile(tmp_path / name) as archive:
        pycs = sorted(n for n in archive.namelist() if n.endswith(".pyc"))
        assert pycs == [f"sparksync_agent/__pycache__/__init__.{TAG}.pyc", f"sparksync_agent/__pycache__/cli.{TAG}.pyc"]
        data = archive.read(f"sparksync_agent/__pycache__/cli.{TAG}.pyc")
        record = archive.read(f"{BYTECODE_DISTRIBUTION}-{AGENT_VERSION}.dist-info/RECORD").decode()
    # What the import system checks: its magic number, PEP 552 flags (hash-based, checked) and the
    # source's hash; then the code is that of the source.
    assert data[:4] == importlib.util.MAGIC_NUMBER
    assert int.from_bytes(data[4:8], "little") == 3
    assert data[8:16] == importlib.util.source_hash(CLI)
    namespace: dict[str, object] = {}
    exec(marshal.loads(data[16:]), namespace)
    assert namespace["VALUE"] == 42
    assert f"sparksync_agent/__pycache__/cli.{TAG}.pyc,sha256=" in record


def test_the_same_wheels_give_the_same_bytecode_wheel(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        folder.mkdir()
        make_bytecode_wheel(HERE, folder, [agent_like_wheel(folder)])
    assert (first / wheel_name(HERE)).read_bytes() == (second / wheel_name(HERE)).read_bytes()
