"""The .deb the packaging tests check, built once per source state and cached outside the clone.

A build (PyInstaller, then dpkg-deb) takes minutes on a small machine, so the
result is kept under ``$SPARKSYNC_DIST_CACHE``, else ``/var/cache/sparksync/dist``
as root, else the user's cache directory. The key hashes everything that goes
into the package: the sources and packaging files, the Python version, and
the name and version of every installed distribution (PyInstaller bundles
them). Any change to those builds a new package; the two newest are kept.
The agent bundles the package ships are kept apart, in ``bundles/``, under
their own key (packaging/deb/agent_bundles.py): a change outside the agent
rebuilds the package but not them.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import platformdirs

from sparksync.core.base.file_lock import exclusive_lock

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "packaging" / "deb" / "build_deb.py"
CACHE_ENV = "SPARKSYNC_DIST_CACHE"
SYSTEM_CACHE = Path("/var/cache/sparksync/dist")
# What goes into the package: the code, its packaging, and what the build reads.
INPUTS = (
    "sparksync", "agent/sparksync_agent", "packaging/pyinstaller", "packaging/deb", "resources",
    "CHANGELOG.md", "pyproject.toml", "agent/pyproject.toml",
)  # fmt: skip
KEEP = 2
BUNDLES = "bundles"  # the shipped agent bundles' own cache, inside this one
# xz level 1: a quarter of the default level's time for a 10% larger file; the
# contents are the same as `make dist` builds.
COMPRESSION_LEVEL = "1"


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    if os.geteuid() == 0:
        return SYSTEM_CACHE
    return Path(platformdirs.user_cache_dir("sparksync")) / "dist"


def source_key() -> str:
    digest = hashlib.sha256()
    for path in _input_files():
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    installed = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions())
    digest.update("\n".join([sys.version, *installed]).encode())
    return digest.hexdigest()[:20]


def cached_deb(log=print) -> tuple[Path, bool]:
    """The .deb for the current sources, and whether it had to be built now."""
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    entry = cache / source_key()
    with exclusive_lock(cache / ".lock"):  # two test runs at once build it once
        found = sorted(entry.glob("sparksync_*.deb"))
        if found:
            os.utime(entry)
            return found[0], False
        _remove_scratch(cache)  # left by a build that was killed: we hold the lock, so none is running
        deb = _build_into(entry, cache, log)
        _prune(cache)
    return deb, True


def _build_into(entry: Path, cache: Path, log) -> Path:
    scratch = Path(tempfile.mkdtemp(prefix="build-", dir=cache))
    try:
        out = scratch / "out"
        cmd = [sys.executable, str(BUILD_SCRIPT), "--out", str(out), "--work", str(scratch / "work"),
               "--compression-level", COMPRESSION_LEVEL, "--bundle-cache", str(cache / BUNDLES)]  # fmt: skip
        with open(scratch / "build.log", "w") as log_file:
            done = subprocess.run(cmd, stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT, check=False)
        build_log = (scratch / "build.log").read_text()
        if done.returncode != 0:
            raise RuntimeError(
                f"build_deb.py failed (exit {done.returncode}); its last lines:\n{build_log[-4000:]}"
            )
        log("\n".join(line for line in build_log.splitlines() if line.startswith("build_deb:")))
        shutil.copyfile(scratch / "build.log", out / "build.log")
        out.rename(entry)  # atomic: a half-built entry is never visible
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return next(entry.glob("sparksync_*.deb"))


def _prune(cache: Path) -> None:
    entries = sorted((p for p in cache.iterdir()
                      if p.is_dir() and not p.name.startswith("build-") and p.name != BUNDLES),
                     key=lambda p: p.stat().st_mtime, reverse=True)  # fmt: skip
    for old in entries[KEEP:]:
        shutil.rmtree(old, ignore_errors=True)


def _remove_scratch(cache: Path) -> None:
    for scratch in cache.glob("build-*"):
        shutil.rmtree(scratch, ignore_errors=True)


def _input_files() -> list[Path]:
    files = []
    for name in INPUTS:
        path = ROOT / name
        candidates = [path] if path.is_file() else path.rglob("*")
        files += [
            p for p in candidates if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        ]
    return sorted(files)
