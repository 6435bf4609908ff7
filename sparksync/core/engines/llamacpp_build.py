"""Build llama.cpp's ``llama-server`` and ``rpc-server`` from source, once, into a cache.

There is no llama.cpp package on Debian bookworm, and the Sparks need a CUDA
build made on the node itself, so SparkSync builds the engine from the full
llama.cpp source that the PyPI sdist ``llama-cpp-python`` vendors. The pinned
sdist version is the cache key, so a cached build never goes stale silently.

The cache lives outside any clone (``/var/cache/sparksync`` as root, else the
user's cache dir, or ``$SPARKSYNC_ENGINE_CACHE``) and is filled atomically:
the build goes into a temporary sibling directory that is renamed into place
only once both binaries exist and ``llama-server --version`` runs.

Command line (used by ``packaging/engines/build-llama-cpp.sh``)::

    python -m sparksync.core.engines.llamacpp_build [--jobs N] [--flavour cpu|cuda] [--check]
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.base.file_lock import exclusive_lock

log = logging.getLogger(__name__)

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
ENGINE_NAME = "llama.cpp"
# Cached name -> CMake target (and output file) in this llama.cpp version;
# upstream renamed the RPC tool to ggml-rpc-server, we keep the familiar name.
CMAKE_TARGETS = {"llama-server": "llama-server", "rpc-server": "ggml-rpc-server"}
BINARIES = tuple(CMAKE_TARGETS)
CACHE_ENV = "SPARKSYNC_ENGINE_CACHE"
SYSTEM_CACHE = Path("/var/cache/sparksync")
FLAVOURS = ("cpu", "cuda")
NVIDIA_DRIVER_MARKER = Path("/proc/driver/nvidia/version")
STEP_MARK = "SPARKSYNC-STEP"  # a line that starts a step: "SPARKSYNC-STEP compile", as the node script prints
LineCallback = Callable[[str], None]

# The two UI flags keep the build offline: otherwise CMake downloads the web UI.
# Static libraries make the two binaries self-contained, so only they are cached.
BASE_CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_NATIVE=OFF",
    "-DGGML_RPC=ON",
)


class EngineBuildError(SparkSyncError):
    """Fetching, configuring or compiling llama.cpp failed."""

    exit_code = 7


@dataclass(frozen=True)
class LlamaCppBinaries:
    """Paths of one cached build."""

    root: Path
    llama_server: Path
    rpc_server: Path
    version: str
    flavour: str


def default_flavour() -> str:
    """``cuda`` where the CUDA compiler and the NVIDIA driver are both present (a Spark), else ``cpu``.

    nvcc alone is not enough: a CUDA llama-server cannot even print its version
    without the driver's libcuda, so a toolkit-only machine (a CI box) builds for the CPU.
    """
    return "cuda" if shutil.which("nvcc") and NVIDIA_DRIVER_MARKER.exists() else "cpu"


def build_key(flavour: str, arch: str | None = None) -> str:
    return f"{LLAMA_CPP_PYTHON_VERSION}-{flavour}-{arch or platform.machine()}"


def cache_root() -> Path:
    """Directory holding every cached llama.cpp build (one subdirectory per key)."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser() / ENGINE_NAME
    if os.geteuid() == 0:
        return SYSTEM_CACHE / ENGINE_NAME
    # Deliberately not SPARKSYNC_HOME: tests get a fresh home each, and a
    # 5-minute build must survive them.
    return Path(platformdirs.user_cache_dir("sparksync")) / ENGINE_NAME


def install_dir(flavour: str | None = None, arch: str | None = None) -> Path:
    return cache_root() / build_key(flavour or default_flavour(), arch)


def bin_dirs() -> list[Path]:
    """Where this computer's builds keep their binaries, every flavour (a directory may not exist yet).

    The local agent has them on its PATH, so an engine built here (``sparksync
    engine install llama.cpp --node local``) is found by name, as on a node.
    """
    return [install_dir(flavour) / "bin" for flavour in FLAVOURS]


def find_binaries(flavour: str | None = None, arch: str | None = None) -> LlamaCppBinaries | None:
    """The cached build for this flavour and arch, or None when there is none yet."""
    flavour = flavour or default_flavour()
    root = install_dir(flavour, arch)
    binaries = _binaries_in(root, flavour)
    if all(_is_executable(p) for p in (binaries.llama_server, binaries.rpc_server)):
        return binaries
    return None


def ensure_built(
    flavour: str | None = None,
    *,
    jobs: int = 2,
    sdist: Path | None = None,
    log_file: Path | None = None,
    on_line: LineCallback | None = None,
) -> LlamaCppBinaries:
    """Return the cached build, building it first when missing (minutes).

    ``on_line`` gets every line the tools print (pip, cmake, the compiler), for a
    progress bar; the lines still go to ``log_file`` when one is given.
    """
    flavour = _check_flavour(flavour or default_flavour())
    found = find_binaries(flavour)
    if found:
        return found
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    # A second builder waits here and then finds the first one's result.
    with exclusive_lock(root / f".{build_key(flavour)}.lock"):
        found = find_binaries(flavour)
        if found:
            return found
        _remove_stale_staging(root, build_key(flavour))
        return _build_into_cache(flavour, jobs, sdist, log_file, on_line)


def _remove_stale_staging(root: Path, key: str) -> None:
    """Drop what a killed build left (up to ~1 GB); we hold the lock, so no build owns it."""
    for stale in root.glob(f".{key}.*"):
        if stale.is_dir():
            log.info("removing %s, left by an interrupted build", stale)
            shutil.rmtree(stale, ignore_errors=True)


def _build_into_cache(
    flavour: str, jobs: int, sdist: Path | None, log_file: Path | None, on_line: LineCallback | None = None
) -> LlamaCppBinaries:
    final = install_dir(flavour)
    # The temp dir is a sibling of the final one so the last step is a same-filesystem rename.
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    started = time.monotonic()
    try:
        _build_in(staging, flavour, jobs, sdist, _Output(log_file, on_line))
        _check_version(_binaries_in(staging, flavour).llama_server)
        shutil.rmtree(final, ignore_errors=True)  # a half-removed old build, never a good one
        staging.chmod(0o755)  # mkdtemp makes it 0700; other users on a node run these binaries too
        staging.rename(final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info("built llama.cpp %s (%s) in %.0f s into %s", LLAMA_CPP_PYTHON_VERSION, flavour,
             time.monotonic() - started, final)
    return _binaries_in(final, flavour)


def _build_in(staging: Path, flavour: str, jobs: int, sdist: Path | None, out: _Output) -> None:
    work = staging / "work"
    work.mkdir()
    out.step("download")
    source = _unpack(sdist or _download_sdist(work, out), work)
    build = work / "build"
    out.step("configure")
    _run(_configure_command(source, build, flavour), out, "configuring llama.cpp (cmake)")
    out.step("compile")
    _run(["cmake", "--build", str(build), "--target", *CMAKE_TARGETS.values(), "-j", str(jobs)], out,
         "compiling llama.cpp")
    out.step("install")
    bin_dir = staging / "bin"
    bin_dir.mkdir()
    for name, target in CMAKE_TARGETS.items():
        shutil.copy2(_built_binary(build, target), bin_dir / name)
    # Only the binaries are kept: the sources and objects are ~1 GB.
    shutil.rmtree(work)


def _configure_command(source: Path, build: Path, flavour: str) -> list[str]:
    cmd = ["cmake", "-S", str(source), "-B", str(build), *BASE_CMAKE_FLAGS]
    if shutil.which("ninja"):
        cmd += ["-G", "Ninja"]
    if flavour == "cuda":
        cmd += ["-DGGML_CUDA=ON"]
        archs = os.environ.get("SPARKSYNC_CUDA_ARCHITECTURES")
        if archs:  # e.g. "121" for a Spark's GB10; ggml's own default list otherwise
            cmd += [f"-DCMAKE_CUDA_ARCHITECTURES={archs}"]
    return cmd


def _download_sdist(work: Path, out: _Output) -> Path:
    """Fetch the pinned sdist with pip (the one registry download the build needs)."""
    dest = work / "sdist"
    _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
          f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", "-d", str(dest)], out,
         "downloading the llama-cpp-python sdist (pip)")
    tarballs = sorted(dest.glob("llama_cpp_python-*.tar.gz"))
    if not tarballs:
        raise EngineBuildError(f"pip saved no llama-cpp-python sdist in {dest}; "
                               "check network access to PyPI or pass a local sdist with --sdist")
    return tarballs[0]


def _unpack(sdist: Path, work: Path) -> Path:
    if not sdist.is_file():
        raise EngineBuildError(f"llama.cpp source archive {sdist} does not exist; pass an existing sdist")
    with tarfile.open(sdist) as tar:
        # The "data" filter refuses absolute paths and links out of the tree (Python >= 3.10.12).
        if hasattr(tarfile, "data_filter"):
            tar.extractall(work / "src", filter="data")
        else:
            tar.extractall(work / "src")
    found = sorted((work / "src").glob("*/vendor/llama.cpp/CMakeLists.txt"))
    if not found:
        raise EngineBuildError(f"{sdist.name} holds no vendor/llama.cpp; use the llama-cpp-python sdist")
    return found[0].parent


def _built_binary(build: Path, name: str) -> Path:
    for candidate in (build / "bin" / name, build / name):
        if candidate.is_file():
            return candidate
    raise EngineBuildError(f"the build finished but {name} is missing under {build}; see the build log")


def _check_version(llama_server: Path) -> None:
    result = subprocess.run([str(llama_server), "--version"], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr).strip()[-500:]
        raise EngineBuildError(f"the new llama-server does not run (--version exited {result.returncode}): "
                               f"{tail}; the cache was left untouched")


class _Output:
    """Where the tools' output goes: the terminal, a log file, and a line callback."""

    def __init__(self, log_file: Path | None = None, on_line: LineCallback | None = None):
        self.log_file, self.on_line = log_file, on_line

    def step(self, name: str) -> None:
        if self.on_line is not None:
            self.on_line(f"{STEP_MARK} {name}")

    def where(self) -> str:
        return f"see {self.log_file}" if self.log_file else "see the output above"


def _run(cmd: list[str], out: _Output | None, what: str) -> None:
    log.info("running %s", " ".join(cmd))
    out = out or _Output()
    if out.on_line is None:
        if out.log_file is None:
            result = subprocess.run(cmd)
        else:
            with open(out.log_file, "ab") as handle:
                result = subprocess.run(cmd, stdout=handle, stderr=subprocess.STDOUT)
        code = result.returncode
    else:
        code = _run_lines(cmd, out)
    if code != 0:
        raise EngineBuildError(f"{what} failed with exit status {code}; {out.where()}")


def _run_lines(cmd: list[str], out: _Output) -> int:
    """Run ``cmd`` and hand each output line to ``out.on_line`` (and to the log file)."""
    log_handle = open(out.log_file, "ab") if out.log_file is not None else None
    try:
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL) as proc:
            assert proc.stdout is not None and out.on_line is not None
            try:
                for raw in proc.stdout:
                    if log_handle is not None:
                        log_handle.write(raw)
                    out.on_line(raw.decode(errors="replace").rstrip("\r\n"))
            except BaseException:  # the callback cancelled (or Ctrl-C): the tool must not run on
                proc.kill()
                raise
            return proc.wait()
    finally:
        if log_handle is not None:
            log_handle.close()


def _binaries_in(root: Path, flavour: str) -> LlamaCppBinaries:
    return LlamaCppBinaries(root=root, llama_server=root / "bin" / "llama-server",
                            rpc_server=root / "bin" / "rpc-server",
                            version=LLAMA_CPP_PYTHON_VERSION, flavour=flavour)


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _check_flavour(flavour: str) -> str:
    if flavour not in FLAVOURS:
        raise EngineBuildError(f"unknown llama.cpp build flavour {flavour!r}; use one of {', '.join(FLAVOURS)}")
    if flavour == "cuda" and not shutil.which("nvcc"):
        raise EngineBuildError("a CUDA build needs nvcc on PATH; install the CUDA toolkit or use --flavour cpu")
    return flavour


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build llama-server and rpc-server into the engine cache.")
    parser.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (default 2)")
    parser.add_argument("--flavour", choices=FLAVOURS, default=None, help="default: cuda when nvcc exists")
    parser.add_argument("--sdist", type=Path, help="a local llama-cpp-python sdist instead of downloading it")
    parser.add_argument("--log-file", type=Path, help="append the compiler output here instead of the terminal")
    parser.add_argument("--check", action="store_true", help="only report whether the cache holds a build")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.check:
        found = find_binaries(args.flavour)
        print(found.root if found else f"missing: {install_dir(args.flavour)}")
        return 0 if found else 1
    try:
        binaries = ensure_built(args.flavour, jobs=args.jobs, sdist=args.sdist, log_file=args.log_file)
    except SparkSyncError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(binaries.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
