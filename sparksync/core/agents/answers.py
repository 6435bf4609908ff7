"""Turning the agent's HTTP answers into models or into client errors.

The agent answers errors with an ``ErrorBody``; this module maps the status
codes the client treats specially (401, 409) onto the client's exception
hierarchy and reads everything else into pydantic models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import logging

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
log = logging.getLogger(__name__)


# ``where`` names the agent as the user knows it: "on spark-2" (``AgentClient.where``), or "at URL".


def unreachable(where: str, what: str, exc: httpx.TransportError) -> AgentUnreachableError:
    """The error for a request that got no (complete) answer."""
    reason = str(exc) or type(exc).__name__
    return AgentUnreachableError(
        f"the agent {where} did not answer while {what} ({reason}). "
        "Check that the agent is running and, for a remote node, that its SSH tunnel is up."
    )


def check_answer(response: httpx.Response, where: str, what: str) -> httpx.Response:
    """Return ``response`` when it is a success, else raise the matching error."""
    if response.is_success:
        return response
    body = _error_body(response)
    if response.status_code == 401:
        raise AgentAuthError(
            f"the agent {where} refused our token while {what}. "
            "The agent's token file may have changed: reconnect the node so the client reads the current token."
        )
    if response.status_code == 409 and body is not None and body.error == "protocol_mismatch":
        raise ProtocolMismatchError(
            f"{body.message.rstrip('.')}. Update SparkSync or the agent so both speak protocol "
            f"{PROTOCOL_VERSION.split('.')[0]}.x (this client speaks {PROTOCOL_VERSION})."
        )
    detail = body.message if body is not None else (response.text[:200] or response.reason_phrase)
    # The status stays on the exception (and in the log); the user reads what was refused and why.
    log.info("the agent %s answered HTTP %s while %s", where, response.status_code, what)
    raise AgentRequestError(
        f"the agent {where} failed while {what}: {detail}" if response.status_code >= 500
        else f"the agent {where} refused the request ({what}): {detail}",
        status=response.status_code,
        code=body.error if body is not None else None,
    )


def parse_answer(response: httpx.Response, model: type[M], where: str, what: str) -> M:
    """Read a successful answer into ``model``; an unreadable one is a protocol mismatch."""
    check_answer(response, where, what)
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        raise unreadable(model.__name__, where, what, exc) from exc


def unreadable(name: str, where: str, what: str, exc: ValidationError) -> ProtocolMismatchError:
    first: Mapping[str, Any] = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ())) or "the document"
    return ProtocolMismatchError(
        f"the agent {where} sent a {name} this client cannot read while {what} "
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
