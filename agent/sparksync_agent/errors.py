"""The agent's exception hierarchy. Each message says what happened and what to do."""


class AgentError(Exception):
    """Base of every error the agent raises on purpose.

    ``exit_code`` is what ``sparksync-agent`` exits with when this error stops it.
    """

    exit_code = 1


class StateDirError(AgentError):
    """The state directory cannot be created or written."""

    exit_code = 2


class TokenPermissionError(AgentError):
    """The token file is readable by others; the agent refuses to start."""

    exit_code = 2


class PortInUseError(AgentError):
    """The API port is already taken by another process."""

    exit_code = 2


class AgentNotRunningError(AgentError):
    """No agent answers for this state directory."""

    exit_code = 3


class AdvertiseError(AgentError):
    """The mDNS advertisement could not be started on the chosen interfaces."""

    exit_code = 2
