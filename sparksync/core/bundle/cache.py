"""The client's bundle cache: ``<cache dir>/bundles/``.

A bundle's file name is its key (agent version, platform, Python), so a user
who has no internet can bring a bundle built elsewhere and drop it in that
folder under the same name. Every cached bundle is verified before use; one
that fails is removed (it is only a cache) and built again.

Lookup order for a node's target: this cache, then the bundles shipped with
the packaged app (``shipped.py``, read-only, used in place), then a build.
The packaged app cannot build (it has no pip); there the error says which
bundle to bring instead.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from sparksync.core.bundle.build import Progress, build_bundle
from sparksync.core.bundle.errors import BundleBuildError, BundleOfflineError, BundleVerifyError
from sparksync.core.bundle.platforms import Target
from sparksync.core.bundle.shipped import find_shipped, is_frozen, shipped_targets
from sparksync.core.bundle.verify import verify_bundle
from sparksync.core.base.file_lock import exclusive_lock
from sparksync.core.base.paths import cache_dir, ensure_dir
from sparksync_agent.protocol import AGENT_VERSION

log = logging.getLogger(__name__)

_LOCK_NAME = ".lock"


def bundles_dir() -> Path:
    return cache_dir() / "bundles"


def cached_path(target: Target) -> Path:
    """Where the bundle for ``target`` (this client's agent version) lives in the cache."""
    return bundles_dir() / target.bundle_name(AGENT_VERSION)


def find_cached(target: Target) -> Path | None:
    """The cached bundle for ``target`` when it is present and sound; a broken one is removed."""
    path = cached_path(target)
    if not path.is_file():
        return None
    try:
        verify_bundle(path, expect=target, agent_version=AGENT_VERSION)
    except BundleVerifyError as exc:
        log.warning("removing the broken cached bundle %s: %s", path, exc)
        path.unlink(missing_ok=True)
        return None
    return path


def find_available(target: Target) -> Path | None:
    """A sound bundle for ``target`` without building: the cached one, else the shipped one."""
    return find_cached(target) or find_shipped(target)


def ensure_bundle(platform: str, python: str, *, progress: Progress | None = None) -> Path:
    """The bundle for a node: cached, shipped with the app, or built into the cache (needs the internet)."""
    target = Target(platform, python)
    with exclusive_lock(ensure_dir(bundles_dir()) / _LOCK_NAME):
        # The lock keeps two deploys from building the same bundle twice at once.
        found = find_available(target)
        if found is not None:
            return found
        if is_frozen():
            raise BundleBuildError(cannot_build_message(target))
        try:
            return build_bundle(target, bundles_dir(), progress=progress)
        except BundleOfflineError as exc:
            raise BundleOfflineError(offline_message(exc, target)) from exc
        except BundleBuildError as exc:
            raise BundleBuildError(f"{exc}. {bring_hint(target)}") from exc


def add_to_cache(bundle: Path) -> Path:
    """Verify a bundle brought from elsewhere and copy it into the cache under its proper name."""
    manifest = verify_bundle(bundle, agent_version=AGENT_VERSION)
    dest = cached_path(manifest.target)
    ensure_dir(dest.parent)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(bundle, tmp)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return dest


def bring_hint(target: Target) -> str:
    """What to do when this computer cannot build the bundle: which file to bring, and where."""
    name = target.bundle_name(AGENT_VERSION)
    return (
        "On a computer with Python and internet, with SparkSync installed from source ('make setup'), "
        f"run 'sparksync bundle build --platform {target.platform} "
        f"--python {target.python} --output DIR', then copy DIR/{name} into {bundles_dir()}/ "
        "on this computer and try again"
    )


def offline_message(exc: BundleOfflineError, target: Target) -> str:
    return f"{exc}; this computer seems to have no internet. {bring_hint(target)}"


def cannot_build_message(target: Target) -> str:
    """Why the packaged app has no bundle for ``target``, what it does carry, and what to bring."""
    carried = ", ".join(t.describe() for t in shipped_targets()) or "none"
    return (
        f"no agent bundle for {target.describe()} (agent {AGENT_VERSION}) is cached or shipped with this "
        f"SparkSync, and the installed package cannot build one (it has no pip); it carries bundles for: "
        f"{carried}. {bring_hint(target)}"
    )
