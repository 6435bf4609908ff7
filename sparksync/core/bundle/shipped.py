"""The agent bundles that ship inside the packaged app: read-only, next to the program.

The packaged SparkSync (the .deb) carries no pip, so it cannot build a
bundle. ``make dist`` therefore builds the bundles most nodes need
(SHIPPED_TARGETS) and puts them in the app's folder, ``bundles/`` beside the
program (``/usr/lib/sparksync/bundles/``). Deploy looks there after the
user's own cache and before building. ``$SPARKSYNC_SHIPPED_BUNDLES`` names
another folder (tests, or a packager who installs them elsewhere).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path

from sparksync.core.bundle.errors import BundleVerifyError
from sparksync.core.bundle.platforms import DEFAULT_PYTHON, PLATFORMS, PYTHONS, Target
from sparksync.core.bundle.verify import verify_bundle
from sparksync_agent.protocol import AGENT_VERSION

log = logging.getLogger(__name__)

SHIPPED_ENV = "SPARKSYNC_SHIPPED_BUNDLES"
SHIPPED_DIRNAME = "bundles"
# A DGX Spark (aarch64, DGX OS 7's Python) and x86_64 Linux hosts with the same Python.
SHIPPED_TARGETS: tuple[Target, ...] = tuple(Target(platform, DEFAULT_PYTHON) for platform in PLATFORMS)

_NAME_RE = re.compile(
    r"^sparksync-agent-(?P<version>.+)-(?P<platform>linux-[a-z0-9_]+)-py(?P<python>\d+\.\d+)\.tar\.gz$"
)


def is_frozen() -> bool:
    """True in the packaged (PyInstaller) app, which has no pip and so cannot build bundles."""
    return bool(getattr(sys, "frozen", False))


def shipped_dirs() -> list[Path]:
    """Where shipped bundles may lie: the override, else (packaged app only) beside the program."""
    override = os.environ.get(SHIPPED_ENV)
    if override:
        return [Path(override)]
    if not is_frozen():
        return []
    dirs = [Path(sys.executable).resolve().parent / SHIPPED_DIRNAME]
    meipass = getattr(sys, "_MEIPASS", None)  # PyInstaller's data folder (_internal/ in one-folder builds)
    if meipass and Path(meipass) / SHIPPED_DIRNAME not in dirs:
        dirs.append(Path(meipass) / SHIPPED_DIRNAME)
    return dirs


def find_shipped(target: Target) -> Path | None:
    """The shipped bundle for ``target`` and this agent version when present and sound.

    A damaged one is skipped with a warning, never removed: the folder belongs to the package.
    """
    name = target.bundle_name(AGENT_VERSION)
    for folder in shipped_dirs():
        path = folder / name
        if not path.is_file():
            continue
        try:
            verify_bundle(path, expect=target, agent_version=AGENT_VERSION)
        except BundleVerifyError as exc:
            log.warning("the shipped bundle %s is damaged, not using it: %s", path, exc)
            continue
        return path
    return None


def shipped_targets() -> list[Target]:
    """The targets the shipped folders hold a bundle for (by file name, this agent version)."""
    found: list[Target] = []
    for folder in shipped_dirs():
        for path in sorted(folder.glob("*.tar.gz")) if folder.is_dir() else []:
            match = _NAME_RE.match(path.name)
            if match is None or match["version"] != AGENT_VERSION:
                continue
            if match["platform"] in PLATFORMS and match["python"] in PYTHONS:
                target = Target(match["platform"], match["python"])
                found += [] if target in found else [target]
    return found
