"""Every error answer is an ErrorBody: a stable code and a sentence, never a traceback."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from sparksync_agent.protocol import ErrorBody

log = logging.getLogger(__name__)


class ApiError(Exception):
    """Raised by a route to answer a 4xx with a code and a message."""

    def __init__(self, status: int, error: str, message: str):
        super().__init__(message)
        self.status, self.error, self.message = status, error, message


# A request that conflicts with what the agent holds now (e.g. a resume point it never
# produced) is a 409: the request itself is well formed, so it is not a 400.
CONFLICT = 409


def error_response(status: int, error: str, message: str) -> JSONResponse:
    return JSONResponse(ErrorBody(error=error, message=message).model_dump(), status_code=status)


def _describe_validation(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "the request is not valid: " + "; ".join(parts)


def allowed_methods(app: FastAPI, request: Request) -> list[str]:
    """Every method some route serves on the request's path."""
    scope = {**request.scope, "method": "\0"}  # no route serves it: each route on the path matches partly
    methods: set[str] = set()
    for route in app.router.routes:
        match, _child = route.matches(scope)
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.error, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(422, "invalid_request", _describe_validation(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = "not_found" if exc.status_code == 404 else f"http_{exc.status_code}"
        response = error_response(exc.status_code, code, str(exc.detail))
        response.headers.update(exc.headers or {})
        if exc.status_code == 405:
            # RFC 9110: a 405 names every method the path allows. Starlette names only those of
            # the first route on the path; GET and DELETE of one path are two routes here.
            response.headers["Allow"] = ", ".join(allowed_methods(app, request))
        return response

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error answering %s", request.url.path)
        return error_response(500, "internal", "the agent hit an unexpected error; its log has the details")
