"""Engine detection: what is installed on this node, with versions where they are cheap to read.

Each check says what it found, or why it is missing, so the app offers only
what can run and tells the user what to install. Python packages are looked
up by the node's ``python3`` in a subprocess without importing them (importing
torch or vLLM takes seconds and memory); versions come from package metadata.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import time

from sparksync_agent.protocol import EngineCheck, EngineReport

log = logging.getLogger(__name__)

BINARIES = ["llama-server", "rpc-server", "vllm", "trtllm-serve", "torchrun", "mpirun", "ray"]
PACKAGES = ["vllm", "sglang", "tensorrt_llm", "torch", "ray"]
RUNTIMES = ["docker", "podman"]
NGC_IMAGE = re.compile(r"^nvcr\.io/nvidia/(vllm|sglang|tensorrt-llm|pytorch)[:/]")
# Binaries whose --version answers fast (no heavy imports behind them).
CHEAP_VERSION = {"llama-server": ["--version"], "rpc-server": ["--version"], "mpirun": ["--version"]}
RUN_TIMEOUT_S = 10.0
# Extra places engines land that a non-login SSH session's PATH lacks.
EXTRA_DIRS = ["~/.local/bin", "/usr/local/bin", "/usr/local/cuda/bin"]

_PACKAGE_PROBE = """
import importlib.util, importlib.metadata, json, sys
out = {}
for name in sys.argv[1:]:
    try:
        spec = importlib.util.find_spec(name)
    except Exception as exc:
        out[name] = {"found": False, "why": f"{type(exc).__name__}: {exc}"}
        continue
    if spec is None:
        out[name] = {"found": False, "why": "not installed for this python"}
        continue
    dist = {"tensorrt_llm": "tensorrt-llm"}.get(name, name)
    try:
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        version = None
    out[name] = {"found": True, "version": version, "path": spec.origin}
print(json.dumps(out))
"""


def search_path(path: str | None = None) -> str:
    base = path if path is not None else os.environ.get("PATH", os.defpath)
    extra = [os.path.expanduser(d) for d in EXTRA_DIRS]
    return os.pathsep.join([base, *(d for d in extra if d not in base.split(os.pathsep))])


def _run(argv: list[str]) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, check=False, timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.debug("%s failed: %s", argv[0], exc)
        return None


def _first_line(text: str) -> str | None:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:200]
    return None


def check_binary(name: str, path: str) -> EngineCheck:
    found = shutil.which(name, path=path)
    if found is None:
        return EngineCheck(name=name, kind="binary", available=False, missing=f"{name} is not on PATH")
    version = None
    if name in CHEAP_VERSION:
        done = _run([found, *CHEAP_VERSION[name]])
        if done is not None:
            version = _version_line(done.stdout + "\n" + done.stderr)
    return EngineCheck(name=name, kind="binary", available=True, path=found, version=version)


def _version_line(text: str) -> str | None:
    for line in text.splitlines():
        if "version" in line.lower():
            return line.strip()[:200]
    return _first_line(text)


def check_packages(python: str | None, names: list[str] = PACKAGES) -> list[EngineCheck]:
    if python is None:
        why = "no python3 on PATH"
        return [EngineCheck(name=f"python:{n}", kind="python", available=False, missing=why) for n in names]
    done = _run([python, "-c", _PACKAGE_PROBE, *names])
    try:
        found = json.loads(done.stdout) if done is not None and done.returncode == 0 else None
    except ValueError:
        found = None
    if found is None:
        why = f"{python} could not be asked ({_first_line(done.stderr) if done else 'it did not run'})"
        return [EngineCheck(name=f"python:{n}", kind="python", available=False, missing=why) for n in names]
    return [_package_check(name, found.get(name, {}), python) for name in names]


def _package_check(name: str, info: dict, python: str) -> EngineCheck:
    if info.get("found"):
        return EngineCheck(
            name=f"python:{name}",
            kind="python",
            available=True,
            version=info.get("version"),
            path=info.get("path"),
        )
    why = f"{info.get('why', 'not installed')} ({python})"
    return EngineCheck(name=f"python:{name}", kind="python", available=False, missing=why)


def check_containers(path: str) -> list[EngineCheck]:
    checks: list[EngineCheck] = []
    for runtime in RUNTIMES:
        found = shutil.which(runtime, path=path)
        if found is None:
            checks.append(
                EngineCheck(
                    name=runtime,
                    kind="container-runtime",
                    available=False,
                    missing=f"{runtime} is not on PATH",
                )
            )
            continue
        checks.extend(_runtime_checks(runtime, found))
    return checks


def _runtime_checks(runtime: str, exe: str) -> list[EngineCheck]:
    done = _run([exe, "version", "--format", "{{.Server.Version}}"])
    if done is None or done.returncode != 0:
        why = _first_line(done.stderr) if done else "it did not answer"
        return [
            EngineCheck(
                name=runtime,
                kind="container-runtime",
                available=False,
                path=exe,
                missing=f"{runtime} daemon not reachable: {why}",
            )
        ]
    checks = [
        EngineCheck(
            name=runtime, kind="container-runtime", available=True, path=exe, version=_first_line(done.stdout)
        )
    ]
    images = _run([exe, "images", "--format", "{{.Repository}}:{{.Tag}}"])
    for image in images.stdout.splitlines() if images and images.returncode == 0 else []:
        if NGC_IMAGE.match(image.strip()):
            checks.append(
                EngineCheck(
                    name=f"image:{image.strip()}", kind="container-image", available=True, path=runtime
                )
            )
    return checks


# Engine -> alternatives, each a list of checks that must all be available.
NEEDS: dict[str, list[list[str]]] = {
    "llama.cpp": [["llama-server"]],
    "llama.cpp-rpc": [["rpc-server"]],
    "vllm": [["vllm"], ["python:vllm"], ["image:nvcr.io/nvidia/vllm"]],
    "sglang": [["python:sglang"], ["image:nvcr.io/nvidia/sglang"]],
    "trtllm": [["trtllm-serve", "mpirun"], ["image:nvcr.io/nvidia/tensorrt-llm"]],
    "torchrun": [["torchrun"], ["python:torch"]],
}


def summarise(checks: list[EngineCheck]) -> tuple[dict[str, bool], dict[str, list[str]]]:
    have = {c.name for c in checks if c.available}
    images = [c.name for c in checks if c.kind == "container-image"]

    def ok(need: str) -> bool:
        if need.startswith("image:"):
            return any(img.startswith(need + ":") for img in images)
        return need in have

    engines, missing = {}, {}
    for engine, options in NEEDS.items():
        engines[engine] = any(all(ok(n) for n in option) for option in options)
        if not engines[engine]:
            missing[engine] = [" + ".join(option) for option in options]
    engines["custom"] = True
    return engines, missing


def detect(path: str | None = None, python: str | None = None) -> EngineReport:
    """Every check, run now; takes about a second (two short subprocesses per found binary)."""
    search = search_path(path)
    python = python or shutil.which("python3", path=search)
    checks = [check_binary(name, search) for name in BINARIES]
    checks += check_packages(python)
    checks += check_containers(search)
    engines, missing = summarise(checks)
    return EngineReport(checked_at=time.time(), checks=checks, engines=engines, missing=missing)


class EngineDetector:
    """Detection on demand, cached: the node's engines change rarely, and checking costs subprocesses."""

    def __init__(self, path: str | None = None, python: str | None = None):
        self.path, self.python = path, python
        self.report: EngineReport | None = None

    def run(self) -> EngineReport:
        self.report = detect(self.path, self.python)
        return self.report


def describe_missing(report: EngineReport) -> dict[str, str]:
    """Engine -> one sentence saying what to install, for people."""
    return {engine: "needs " + " or ".join(options) for engine, options in report.missing.items()}
