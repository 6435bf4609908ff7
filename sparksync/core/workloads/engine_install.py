"""``sparksync engine install llama.cpp``: build llama-server and rpc-server on a node, or on this computer.

``install_engine(fleet, node, ...)`` is what both faces call. On this
computer the build is ``engines.llamacpp_build`` itself, into the engine
cache whose folders the local agent has on its PATH (so recipes name the
engine by its name, as on a node). On a paired node:

The node builds the same pinned llama.cpp as ``packaging/engines/build-llama-cpp.sh``
(the source vendored in the PyPI sdist ``llama-cpp-python``, the same CMake
flags from ``sparksync.core.engines.llamacpp_build``), with CUDA where
``nvcc`` and the NVIDIA driver are both present (a Spark). The node has no
SparkSync client installed, so the build is a self-contained bash script,
generated here, uploaded over SFTP and run over SSH; its output streams back
for progress. The result goes, as the SSH user and without root, into

    ~/.local/share/sparksync-engines/llama.cpp/<version>-<flavour>-<arch>/bin/
    ~/.local/bin/llama-server, ~/.local/bin/rpc-server      (links to the above)

where the agent's engine detection looks (``~/.local/bin``). A finished build
is reused: running it again only re-links.
"""

from __future__ import annotations

import logging
import re
import shlex
import threading
from collections.abc import Callable
from dataclasses import dataclass

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # paramiko and the fleet load with the SSH side only
    import paramiko

    from sparksync.core.fleet.fleet import Fleet

from sparksync.core.agents.this_computer import is_local
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.engines.llamacpp_build import (
    BASE_CMAKE_FLAGS,
    CMAKE_TARGETS,
    LLAMA_CPP_PYTHON_VERSION,
    STEP_MARK,
)

log = logging.getLogger(__name__)

SCRIPT_PATH = ".cache/sparksync/build-llama-cpp.sh"  # relative to the SSH user's home
INSTALL_ROOT = ".local/share/sparksync-engines/llama.cpp"
BIN_LINKS = ".local/bin"
FLAVOURS = ("auto", "cpu", "cuda")
BUILD_TIMEOUT_S = 3 * 3600.0  # a CUDA build on 20 Arm cores takes minutes; a slow disk more
_NINJA = re.compile(r"^\[(\d+)/(\d+)\]")
_MAKE = re.compile(r"^\[\s*(\d+)%\]")


class EngineInstallError(SparkSyncError):
    exit_code = 7


@dataclass(frozen=True)
class InstallProgress:
    step: str  # check, download, unpack, configure, compile, install, done
    percent: float | None
    line: str


def build_script() -> str:
    """The bash script the node runs: ``bash SCRIPT [auto|cpu|cuda] [JOBS]``."""
    flags = " ".join(shlex.quote(f) for f in BASE_CMAKE_FLAGS)
    targets = " ".join(CMAKE_TARGETS.values())
    copies = "\n".join(
        f'cp "$(built {shlex.quote(target)})" "$staging/out/bin/{name}"'
        for name, target in CMAKE_TARGETS.items()
    )
    links = " ".join(CMAKE_TARGETS)
    return _SCRIPT.format(
        version=LLAMA_CPP_PYTHON_VERSION, root=INSTALL_ROOT, bin_links=BIN_LINKS, mark=STEP_MARK,
        flags=flags, targets=targets, copies=copies, links=links,
    )  # fmt: skip


_SCRIPT = """#!/usr/bin/env bash
# Builds llama.cpp's llama-server and rpc-server for this node (made by SparkSync's engine install).
set -euo pipefail
version={version}
flavour="${{1:-auto}}"
jobs="${{2:-$(nproc)}}"
export PATH="$PATH:/usr/local/cuda/bin"
step() {{ echo "{mark} $*"; }}
step check
if [ "$flavour" = auto ]; then
  if command -v nvcc >/dev/null 2>&1 && [ -e /proc/driver/nvidia/version ]; then flavour=cuda; else flavour=cpu; fi
fi
key="$version-$flavour-$(uname -m)"
root="$HOME/{root}"
final="$root/$key"
link() {{
  mkdir -p "$HOME/{bin_links}"
  for name in {links}; do ln -sfn "$final/bin/$name" "$HOME/{bin_links}/$name"; done
  step done "$final" "$flavour"
}}
if [ -x "$final/bin/llama-server" ] && [ -x "$final/bin/rpc-server" ]; then link; exit 0; fi
missing=""
for tool in cmake python3 c++; do command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"; done
if [ "$flavour" = cuda ] && ! command -v nvcc >/dev/null 2>&1; then missing="$missing nvcc"; fi
if [ -n "$missing" ]; then
  echo "missing on this node:$missing (install: sudo apt-get install cmake build-essential python3-pip)" >&2
  exit 3
fi
mkdir -p "$root"
staging="$(mktemp -d "$root/.$key.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
step download
python3 -m pip download --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$staging/sdist"
step unpack
tar -xzf "$staging"/sdist/llama_cpp_python-*.tar.gz -C "$staging"
src="$(dirname "$(ls "$staging"/llama_cpp_python-*/vendor/llama.cpp/CMakeLists.txt)")"
step configure
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
cuda=()
if [ "$flavour" = cuda ]; then cuda=(-DGGML_CUDA=ON); fi
cmake -S "$src" -B "$staging/build" {flags} "${{generator[@]}}" "${{cuda[@]}}"
step compile
cmake --build "$staging/build" --target {targets} -j "$jobs"
built() {{ if [ -f "$staging/build/bin/$1" ]; then echo "$staging/build/bin/$1"; else echo "$staging/build/$1"; fi; }}
step install
mkdir -p "$staging/out/bin"
{copies}
"$staging/out/bin/llama-server" --version
chmod 755 "$staging/out"
rm -rf "$final"
mv "$staging/out" "$final"
link
"""


def progress_of(line: str, step: str) -> InstallProgress:
    """What one output line says: a new step, or how far the compile is."""
    if line.startswith(STEP_MARK):
        return InstallProgress(line.split()[1], None, line)
    found = _NINJA.match(line)
    if found:
        return InstallProgress(step, 100.0 * int(found[1]) / max(int(found[2]), 1), line)
    found = _MAKE.match(line)
    if found:
        return InstallProgress(step, float(found[1]), line)
    return InstallProgress(step, None, line)


def install_command(flavour: str = "auto", jobs: int | None = None) -> list[str]:
    """The command run on the node (its home is the SSH session's working directory)."""
    if flavour not in FLAVOURS:
        raise EngineInstallError(f"unknown flavour {flavour!r}; use one of {', '.join(FLAVOURS)}")
    return ["bash", SCRIPT_PATH, flavour, *([str(jobs)] if jobs else [])]


def install_engine(
    fleet: Fleet,
    node: str,
    on_progress: Callable[[InstallProgress], None],
    flavour: str = "auto",
    jobs: int | None = None,
    cancel: threading.Event | None = None,
) -> str:
    """Install llama.cpp on ``node`` (this computer too), then make its agent look again; the install dir."""
    if flavour not in FLAVOURS:
        raise EngineInstallError(f"unknown flavour {flavour!r}; use one of {', '.join(FLAVOURS)}")
    if is_local(node):
        where = install_here(on_progress, flavour, jobs, cancel)
    else:
        where = install_llamacpp(fleet.transports.get(node, 30.0), on_progress, flavour, jobs, cancel)
    fleet.call(node, lambda client: client.engines(refresh=True))
    return where


def install_here(
    on_progress: Callable[[InstallProgress], None],
    flavour: str = "auto",
    jobs: int | None = None,
    cancel: threading.Event | None = None,
) -> str:
    """Build llama.cpp on this computer (or find the build), into the engine cache; the install dir."""
    import os

    from sparksync.core.engines.llamacpp_build import ensure_built

    step = ["check"]

    def line(text: str) -> None:
        if cancel is not None and cancel.is_set():
            raise EngineInstallError("the engine install was cancelled; nothing was installed.")
        progress = progress_of(text, step[0])
        step[0] = progress.step
        on_progress(progress)

    line(f"{STEP_MARK} check")
    built = ensure_built(None if flavour == "auto" else flavour, jobs=jobs or os.cpu_count() or 2, on_line=line)
    line(f"{STEP_MARK} done {built.root} {built.flavour}")
    return str(built.root)


def install_llamacpp(
    transport: paramiko.Transport,
    on_progress: Callable[[InstallProgress], None],
    flavour: str = "auto",
    jobs: int | None = None,
    cancel: threading.Event | None = None,
) -> str:
    """Upload and run the build on the node; the install dir. EngineInstallError with the output's tail."""
    command = install_command(flavour, jobs)
    _upload(transport, build_script())
    channel = transport.open_session(timeout=30)
    try:
        channel.set_combine_stderr(True)
        channel.settimeout(1.0)
        channel.exec_command(shlex.join(command))
        return _read_until_done(channel, on_progress, cancel)
    finally:
        channel.close()


def _upload(transport: paramiko.Transport, script: str) -> None:
    import paramiko

    sftp = paramiko.SFTPClient.from_transport(transport)
    if sftp is None:
        raise paramiko.SSHException("the node refused the SFTP subsystem")
    try:
        parent = ""
        for part in SCRIPT_PATH.split("/")[:-1]:
            parent = f"{parent}/{part}" if parent else part
            try:
                sftp.mkdir(parent, 0o700)
            except OSError:
                pass  # it exists
        with sftp.open(SCRIPT_PATH, "w") as handle:
            handle.write(script)
        sftp.chmod(SCRIPT_PATH, 0o700)
    finally:
        sftp.close()


def _read_until_done(
    channel: paramiko.Channel, on_progress: Callable[[InstallProgress], None], cancel: threading.Event | None
) -> str:
    tail: list[str] = []
    step, pending, final = "check", b"", ""
    while True:
        if cancel is not None and cancel.is_set():
            raise EngineInstallError("the engine install was cancelled; nothing was installed.")
        try:
            chunk = channel.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            line = raw.decode(errors="replace").rstrip("\r")
            tail = (tail + [line])[-30:]
            progress = progress_of(line, step)
            step = progress.step
            if step == "done":
                final = line.split()[2] if len(line.split()) > 2 else ""
            on_progress(progress)
    status = channel.recv_exit_status()
    if status != 0:
        shown = "\n  ".join(tail[-15:])
        raise EngineInstallError(
            f"building llama.cpp on the node failed (exit {status}) at '{step}':\n  {shown}"
        )
    return final
