"""Errors of the model operations: each says what happened and what to do next."""

from __future__ import annotations

from sparksync.core.base.errors import SparkSyncError


class ModelError(SparkSyncError):
    """A model operation could not be done (no such model, no source)."""


class NoSpaceError(ModelError):
    """A target's disk cannot hold the model: refused before any byte moved."""

    exit_code = 41


class CopyCancelled(ModelError):
    """The copy was stopped (Ctrl-C): what arrived is kept for the next run."""

    exit_code = 130


class CopyFailedError(ModelError):
    """A copy ended without a verified model on some target."""

    exit_code = 42


class ModelMissingError(ModelError):
    """A workload's model is not on every node of its placement."""

    exit_code = 40
