"""Offline agent bundles: the agent wheel plus every dependency wheel for one node target.

``ensure_bundle(platform, python)`` is what deploy calls; ``build_bundle`` and
``verify_bundle`` back ``sparksync bundle build`` and ``sparksync bundle verify``.
The archive format is described in ``archive.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_exports

if TYPE_CHECKING:
    from sparksync.core.bundle.build import build_bundle
    from sparksync.core.bundle.cache import (
        add_to_cache,
        bundles_dir,
        cached_path,
        cannot_build_message,
        ensure_bundle,
        find_available,
        find_cached,
        offline_message,
    )
    from sparksync.core.bundle.errors import (
        BundleBuildError,
        BundleError,
        BundleOfflineError,
        BundleVerifyError,
        UnsupportedTargetError,
    )
    from sparksync.core.bundle.install import install_command, installer_wheels, pip_wheel, venv_command
    from sparksync.core.bundle.manifest import BundleManifest
    from sparksync.core.bundle.platforms import DEFAULT_PLATFORM, DEFAULT_PYTHON, PLATFORMS, PYTHONS, Target
    from sparksync.core.bundle.shipped import SHIPPED_TARGETS, find_shipped, is_frozen, shipped_dirs
    from sparksync.core.bundle.verify import verify_bundle

_WHERE = {
    "build_bundle": "build",
    "add_to_cache": "cache",
    "bundles_dir": "cache",
    "cached_path": "cache",
    "cannot_build_message": "cache",
    "ensure_bundle": "cache",
    "find_available": "cache",
    "find_cached": "cache",
    "offline_message": "cache",
    "BundleBuildError": "errors",
    "BundleError": "errors",
    "BundleOfflineError": "errors",
    "BundleVerifyError": "errors",
    "UnsupportedTargetError": "errors",
    "install_command": "install",
    "installer_wheels": "install",
    "pip_wheel": "install",
    "venv_command": "install",
    "BundleManifest": "manifest",
    "DEFAULT_PLATFORM": "platforms",
    "DEFAULT_PYTHON": "platforms",
    "PLATFORMS": "platforms",
    "PYTHONS": "platforms",
    "Target": "platforms",
    "SHIPPED_TARGETS": "shipped",
    "find_shipped": "shipped",
    "is_frozen": "shipped",
    "shipped_dirs": "shipped",
    "verify_bundle": "verify",
}
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
    "cannot_build_message",
    "ensure_bundle",
    "find_available",
    "find_cached",
    "find_shipped",
    "install_command",
    "installer_wheels",
    "is_frozen",
    "offline_message",
    "pip_wheel",
    "shipped_dirs",
    "venv_command",
    "verify_bundle",
]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
