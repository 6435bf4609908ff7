"""The offline agent bundles the package ships, built once per agent source state.

The packaged app has no pip, so it cannot build a bundle when a deploy needs
one; it ships the bundles for SHIPPED_TARGETS instead (a DGX Spark:
linux-aarch64 with DGX OS's Python; x86_64 Linux hosts with the same Python).
Building them needs the package index. They are kept in a cache folder under
a key that hashes what goes into them (the agent's code and project file, the
bundle builder), so a package rebuilt for a change elsewhere reuses them.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What a bundle's contents depend on: the agent wheel and the builder's choices.
INPUTS = ("agent/sparksync_agent", "agent/pyproject.toml", "sparksync/core/bundle")
KEEP = 2


def bundle_key() -> str:
    digest = hashlib.sha256()
    for path in _input_files():
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def shipped_bundles(cache: Path, say: Callable[[str], None]) -> list[Path]:
    """Verified bundles for every shipped target: reused from ``cache``, else built into it."""
    from sparksync.core.bundle import SHIPPED_TARGETS, BundleVerifyError, build_bundle, verify_bundle
    from sparksync_agent.protocol import AGENT_VERSION

    entry = cache / bundle_key()
    entry.mkdir(parents=True, exist_ok=True)
    found = []
    for target in SHIPPED_TARGETS:
        path = entry / target.bundle_name(AGENT_VERSION)
        if path.is_file():
            try:
                verify_bundle(path, expect=target, agent_version=AGENT_VERSION)
                say(f"reusing {path}")
                found.append(path)
                continue
            except BundleVerifyError as exc:
                say(f"rebuilding the damaged {path.name}: {exc}")
                path.unlink()
        found.append(build_bundle(target, entry, progress=say))
    _prune(cache, keep=entry)
    return found


def _prune(cache: Path, keep: Path) -> None:
    entries = sorted((p for p in cache.iterdir() if p.is_dir() and p != keep),
                     key=lambda p: p.stat().st_mtime, reverse=True)  # fmt: skip
    for old in entries[KEEP - 1 :]:
        shutil.rmtree(old, ignore_errors=True)


def _input_files() -> list[Path]:
    files = []
    for name in INPUTS:
        path = ROOT / name
        candidates = [path] if path.is_file() else path.rglob("*")
        files += [
            p for p in candidates if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        ]
    return sorted(files)


if __name__ == "__main__":  # python packaging/deb/agent_bundles.py CACHE: build or reuse, print the paths
    for bundle in shipped_bundles(Path(sys.argv[1]), print):
        print(bundle)
