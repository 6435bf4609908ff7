"""Errors of deploying the agent; each says what happened on the node and what to do next."""

from __future__ import annotations

from sparksync.core.base.errors import SparkSyncError


class DeployError(SparkSyncError):
    """Base of the deploy errors. The node was left as it was before the deploy."""

    exit_code = 20


class PrecheckError(DeployError):
    """The node cannot run the agent as it is: no python3, no venv, too little disk, wrong CPU.

    ``problems`` holds one line per failed check.
    """

    exit_code = 21

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems or [message]


class UploadError(DeployError):
    """The bundle could not be copied to the node."""


class InstallError(DeployError):
    """Making the venv or installing the bundle into it failed on the node."""


class StartError(DeployError):
    """The agent's service or supervisor could not be started."""


class HealthCheckError(DeployError):
    """The new agent did not answer hello with the expected version in time."""


class DeployCancelled(DeployError):
    """The user cancelled the deploy (Ctrl-C or the GUI's cancel)."""

    exit_code = 130


class UninstallError(DeployError):
    """The agent could not be removed from the node."""
