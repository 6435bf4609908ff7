"""What the supervisor refuses, each with the HTTP status and code the API answers with."""

from __future__ import annotations

from sparksync_agent.errors import AgentError


class SupervisorError(AgentError):
    status = 400
    code = "bad_request"


class InvalidName(SupervisorError):
    status, code = 422, "invalid_name"


class AlreadyRunning(SupervisorError):
    status, code = 409, "already_running"


class PortInUse(SupervisorError):
    status, code = 409, "port_in_use"


class CommandNotFound(SupervisorError):
    status, code = 400, "command_not_found"


class UnknownWorkload(SupervisorError):
    status, code = 404, "unknown_workload"


class StillRunning(SupervisorError):
    status, code = 409, "still_running"
