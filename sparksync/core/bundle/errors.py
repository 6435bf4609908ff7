"""Errors of the offline agent bundles (build, cache, verify)."""

from __future__ import annotations

from sparksync.core.base.errors import SparkSyncError


class BundleError(SparkSyncError):
    """Base of every bundle error."""


class UnsupportedTargetError(BundleError):
    """A platform or Python version that SparkSync builds no bundle for."""


class BundleBuildError(BundleError):
    """Building a bundle failed (pip failed, or the agent's source is missing)."""


class BundleOfflineError(BundleBuildError):
    """pip could not reach its package index: this computer has no internet (or no mirror)."""


class BundleVerifyError(BundleError):
    """A bundle archive is damaged, tampered with, or built for another target.

    ``problems`` holds one line per problem, each naming the file it is about.
    """

    def __init__(self, message: str, problems: list[str]):
        super().__init__(message)
        self.problems = problems
