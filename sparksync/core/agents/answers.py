"""Turning the agent's HTTP answers into models or into client errors.

The agent answers errors with an ``ErrorBody``; this module maps the status
codes the client treats specially (401, 409) onto the client's exception
hierarchy and reads everything else into pydantic models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from sparksync.core.base.errors import (
    AgentAuthError,
    AgentRequestError,
    AgentUnreachableError,
    ProtocolMismatchError,
)
from sparksync_agent.protocol import PROTOCOL_VERSION, ErrorBody

M = TypeVar("M", bound=BaseModel)


def unreachable(base_url: str, what: str, exc: httpx.TransportError) -> AgentUnreachableError:
    """The error for a request that got no (complete) answer."""
    reason = str(exc) or type(exc).__name__
    return AgentUnreachableError(
        f"the agent at {base_url} did not answer while {what} ({reason}). "
        "Check that the agent is running and, for a remote node, that its SSH tunnel is up."
    )


def check_answer(response: httpx.Response, base_url: str, what: str) -> httpx.Response:
    """Return ``response`` when it is a success, else raise the matching error."""
    if response.is_success:
        return response
    body = _error_body(response)
    if response.status_code == 401:
        raise AgentAuthError(
            f"the agent at {base_url} refused our token while {what} (HTTP 401). "
            "The agent's token file may have changed: reconnect the node so the client reads the current token."
        )
    if response.status_code == 409 and body is not None and body.error == "protocol_mismatch":
        raise ProtocolMismatchError(
            f"{body.message.rstrip('.')}. Update SparkSync or the agent so both speak protocol "
            f"{PROTOCOL_VERSION.split('.')[0]}.x (this client speaks {PROTOCOL_VERSION})."
        )
    detail = body.message if body is not None else (response.text[:200] or response.reason_phrase)
    raise AgentRequestError(
        f"the agent at {base_url} answered HTTP {response.status_code} while {what}: {detail}",
        status=response.status_code,
        code=body.error if body is not None else None,
    )


def parse_answer(response: httpx.Response, model: type[M], base_url: str, what: str) -> M:
    """Read a successful answer into ``model``; an unreadable one is a protocol mismatch."""
    check_answer(response, base_url, what)
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        raise unreadable(model.__name__, base_url, what, exc) from exc


def unreadable(name: str, base_url: str, what: str, exc: ValidationError) -> ProtocolMismatchError:
    first: Mapping[str, Any] = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ())) or "the document"
    return ProtocolMismatchError(
        f"the agent at {base_url} sent a {name} this client cannot read while {what} "
        f"({where}: {first.get('msg', 'invalid')}). "
        f"This client speaks protocol {PROTOCOL_VERSION}: update SparkSync or the agent."
    )


def error_code(response: httpx.Response) -> str | None:
    """The stable ``error`` code of an error answer, if it carries an ErrorBody."""
    body = _error_body(response)
    return body.error if body is not None else None


def _error_body(response: httpx.Response) -> ErrorBody | None:
    try:
        return ErrorBody.model_validate_json(response.content)
    except (ValidationError, ValueError):
        return None
