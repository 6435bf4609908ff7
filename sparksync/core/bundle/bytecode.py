"""Bytecode for what the agent imports as it starts, compiled once when the bundle is built.

The node installs without bytecode, so a fresh venv's first agent start
compiled every module it imported: about 0.5 of the 3 CPU-seconds a lab
node's deploy costs, the same bytes on every node. When this interpreter is
the target's Python (bytecode is per minor version), the build compiles those
modules from the bundle's own wheels and ships the ``.pyc`` files as one more
wheel, tagged ``cpXY-none-any``: a node of another Python refuses it by name
like any wheel that does not fit, and it installs beside the sources like
any other. The files are checked-hash pycs (PEP 552), so they hold whatever
times the installed sources get, and Python compiles afresh any source that
differs. Built on another Python, a bundle has no such wheel and the node
compiles at start, as before.

Which modules: those a child of this interpreter imports when it loads the
agent's start-up modules (below), by name; the sources come from the
bundle's wheels, so a name the bundle's versions do not have is skipped.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import py_compile
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from sparksync_agent.protocol import AGENT_VERSION

log = logging.getLogger(__name__)

BYTECODE_DISTRIBUTION = "sparksync_agent_bytecode"
# What a node's agent imports from its venv as it starts: the console script, the supervisor, the
# server with what uvicorn loads when it starts serving, the collectors, and the spare keeper.
STARTUP_MODULES = (
    "sparksync_agent.cli",
    "sparksync_agent.supervise",
    "sparksync_agent.daemon",
    "sparksync_agent.runtime",
    "sparksync_agent.collectors.workloads",
    "sparksync_agent.supervisor.keeper",
    "uvicorn.lifespan.on",
    "uvicorn.loops.auto",
    "uvicorn.loops.uvloop",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.http.httptools_impl",
    "uvicorn.protocols.websockets.auto",
    "fastapi.telemetry._runtime",
    "pynvml",
)
# Imports each start-up module it can and prints the names of every module loaded from a .py file.
_LIST_MODULES = r"""
import importlib, json, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception:
        pass
print(json.dumps(sorted(n for n, m in list(sys.modules.items())
                        if str(getattr(getattr(m, "__spec__", None), "origin", "")).endswith(".py"))))
"""
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed, so the same wheels give the same bundle bytes
_LIST_TIMEOUT_S = 120.0


def wheel_name(python: str) -> str:
    return f"{BYTECODE_DISTRIBUTION}-{AGENT_VERSION}-{_interpreter(python)}-none-any.whl"


def _interpreter(python: str) -> str:
    return "cp" + python.replace(".", "")


def builds_for(python: str) -> bool:
    """Whether this interpreter writes the bytecode a node's CPython ``python`` (e.g. "3.12") reads."""
    return sys.implementation.name == "cpython" and f"{sys.version_info[0]}.{sys.version_info[1]}" == python


def make_bytecode_wheel(python: str, wheel_dir: Path, installs: list[str]) -> str | None:
    """Write the start-up bytecode wheel for ``python`` into ``wheel_dir``; its name, or None when not made."""
    if not builds_for(python):
        return None
    modules = startup_modules()
    if not modules:
        return None
    wanted = {path for module in modules for path in _source_paths(module)}
    with tempfile.TemporaryDirectory(prefix="sparksync-bytecode-") as scratch:
        compiled = _compile_from_wheels(wheel_dir, installs, wanted, Path(scratch))
    if not compiled:
        return None
    name = wheel_name(python)
    _write_wheel(wheel_dir / name, python, compiled)
    log.info("bundle: %d start-up modules compiled for Python %s into %s", len(compiled), python, name)
    return name


def startup_modules() -> list[str]:
    """Module names the agent's start loads, as a child of this interpreter imports them ([] if it cannot)."""
    if getattr(sys, "frozen", False):
        return []  # a frozen app's executable is the app itself, not a Python that runs -c
    try:
        done = subprocess.run(
            [sys.executable, "-c", _LIST_MODULES, *STARTUP_MODULES],
            capture_output=True, text=True, timeout=_LIST_TIMEOUT_S, check=False,
        )  # fmt: skip
        names = json.loads(done.stdout) if done.returncode == 0 else []
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        log.info("bundle: no start-up bytecode (listing the agent's modules failed: %s)", exc)
        return []
    return [n for n in names if isinstance(n, str)]


def _source_paths(module: str) -> tuple[str, str]:
    base = module.replace(".", "/")
    return f"{base}.py", f"{base}/__init__.py"


def _compile_from_wheels(wheel_dir: Path, installs: list[str], wanted: set[str], scratch: Path) -> dict[str, bytes]:
    """pyc path (in the installed tree) -> checked-hash pyc bytes, for each wanted source in the wheels."""
    compiled: dict[str, bytes] = {}
    for wheel in installs:
        with zipfile.ZipFile(wheel_dir / wheel) as archive:
            for member in archive.namelist():
                if member in wanted and member not in compiled:
                    source = scratch / "source.py"
                    source.write_bytes(archive.read(member))
                    target = scratch / "source.pyc"
                    py_compile.compile(str(source), str(target), dfile=member, doraise=True,
                                       invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)  # fmt: skip
                    compiled[_cache_path(member)] = target.read_bytes()
    return compiled


def _cache_path(source: str) -> str:
    """``a/b.py`` -> ``a/__pycache__/b.cpython-312.pyc``: where an unoptimised import looks for it."""
    folder, _, file = source.rpartition("/")
    cached = f"__pycache__/{file.removesuffix('.py')}.{sys.implementation.cache_tag}.pyc"
    return f"{folder}/{cached}" if folder else cached


def _write_wheel(path: Path, python: str, files: dict[str, bytes]) -> None:
    info = f"{BYTECODE_DISTRIBUTION}-{AGENT_VERSION}.dist-info"
    metadata = (
        f"Metadata-Version: 2.1\nName: {BYTECODE_DISTRIBUTION.replace('_', '-')}\nVersion: {AGENT_VERSION}\n"
        f"Summary: bytecode of the modules the SparkSync agent imports at start, for CPython {python}\n"
    )
    tag = f"{_interpreter(python)}-none-any"
    wheel = f"Wheel-Version: 1.0\nGenerator: sparksync\nRoot-Is-Purelib: true\nTag: {tag}\n"
    entries = {**dict(sorted(files.items())), f"{info}/METADATA": metadata.encode(), f"{info}/WHEEL": wheel.encode()}
    record = [f"{name},sha256={_digest(data)},{len(data)}" for name, data in entries.items()]
    entries[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            item = zipfile.ZipInfo(name, _ZIP_TIME)
            item.compress_type = zipfile.ZIP_DEFLATED
            item.external_attr = 0o644 << 16
            archive.writestr(item, data)


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
