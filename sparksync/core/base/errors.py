"""The client's exception hierarchy.

Every message says what happened and what to do next, and none ever holds a
token: messages end up in logs, status bars and bug reports.
"""

from __future__ import annotations


class SparkSyncError(Exception):
    """Base of every error the client raises on purpose.

    ``exit_code`` is what the CLI exits with when this error stops a command.
    """

    exit_code = 1


class AgentUnreachableError(SparkSyncError):
    """No answer from the agent: refused, reset, timed out or dropped."""

    exit_code = 3


class AgentAuthError(SparkSyncError):
    """The agent refused the bearer token (401)."""

    exit_code = 4


class ProtocolMismatchError(SparkSyncError):
    """The agent speaks another protocol MAJOR, or sent a reply we cannot read."""

    exit_code = 5


class AgentRequestError(SparkSyncError):
    """The agent answered a request with an error other than the ones above."""

    def __init__(self, message: str, *, status: int, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code


class LocalAgentError(SparkSyncError):
    """The local agent for "this computer" could not be started or attached."""

    exit_code = 6


class LocalAgentCancelled(LocalAgentError):
    """Starting the local agent was cancelled (the window closed meanwhile)."""
