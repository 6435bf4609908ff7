"""Errors the planner raises on purpose; each says what was wrong and what to do."""

from __future__ import annotations

from sparksync.core.base.errors import SparkSyncError


class PlannerError(SparkSyncError):
    """Base of the planner's errors."""

    exit_code = 2  # bad input, as click reports a bad option


class UnknownQuantError(PlannerError):
    """A quantisation name the planner has no bytes-per-parameter figure for."""


class PlanInputError(PlannerError):
    """A number that cannot be planned with (negative, zero, missing, out of range)."""


class ModelFileError(PlannerError):
    """A model file that could not be read as GGUF or safetensors + config.json."""
