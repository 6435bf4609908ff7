"""Offline agent bundles: the agent wheel plus every dependency wheel for one node target.

``ensure_bundle(platform, python)`` is what deploy calls; ``build_bundle`` and
``verify_bundle`` back ``sparksync bundle build`` and ``sparksync bundle verify``.
The archive format is described in ``archive.py``.
"""

from sparksync.core.bundle.build import build_bundle
from sparksync.core.bundle.cache import (
    add_to_cache,
    bundles_dir,
    cached_path,
    ensure_bundle,
    find_available,
    find_cached,
)
from sparksync.core.bundle.errors import (
    BundleBuildError,
    BundleError,
    BundleOfflineError,
    BundleVerifyError,
    UnsupportedTargetError,
)
from sparksync.core.bundle.install import install_command
from sparksync.core.bundle.manifest import BundleManifest
from sparksync.core.bundle.platforms import DEFAULT_PLATFORM, DEFAULT_PYTHON, PLATFORMS, PYTHONS, Target
from sparksync.core.bundle.shipped import SHIPPED_TARGETS, find_shipped, shipped_dirs
from sparksync.core.bundle.verify import verify_bundle

__all__ = [
    "DEFAULT_PLATFORM",
    "DEFAULT_PYTHON",
    "PLATFORMS",
    "PYTHONS",
    "SHIPPED_TARGETS",
    "BundleBuildError",
    "BundleError",
    "BundleManifest",
    "BundleOfflineError",
    "BundleVerifyError",
    "Target",
    "UnsupportedTargetError",
    "add_to_cache",
    "build_bundle",
    "bundles_dir",
    "cached_path",
    "ensure_bundle",
    "find_available",
    "find_cached",
    "find_shipped",
    "install_command",
    "shipped_dirs",
    "verify_bundle",
]
