"""Errors the workload layer raises on purpose; each says what happened and what to do."""

from __future__ import annotations

from pydantic import ValidationError

from sparksync.core.base.errors import SparkSyncError


class WorkloadError(SparkSyncError):
    """Base of the workload layer's errors."""

    exit_code = 2  # bad input, as click reports a bad option


class RecipeError(WorkloadError):
    """A recipe that cannot describe a launch (missing model, bad parallelism...)."""


class RecipeFileError(WorkloadError):
    """A recipe file that could not be read, parsed or written."""


class FutureRecipeVersionError(RecipeFileError):
    """A recipe file written by a newer SparkSync, in a format this one cannot read."""


class RecipeNotFoundError(WorkloadError):
    """No user or built-in recipe has that name."""


class PlanError(WorkloadError):
    """A placement plan that cannot run: overlaps, wrong group sizes, too many nodes."""


class FabricError(WorkloadError):
    """The fabric cannot carry a multi-node group (no fabric IP, no RoCE device...)."""


class RocenanteUnavailableError(FabricError):
    """RoCEnante was chosen but is not configured for the cluster or installed on a node."""


class MemoryFitError(WorkloadError):
    """A group's model does not fit in its nodes' free memory."""


def describe_validation(exc: ValidationError, what: str) -> str:
    """One readable line per problem pydantic found, prefixed by ``what``."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or what
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    return f"{what} is not valid: " + "; ".join(parts) + "."
