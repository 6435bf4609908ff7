"""Error answers in the shape OpenAI clients expect: {"error": {"message", "type", "param", "code"}}.

Every message says what went wrong and what to do next. Before the first byte
an error is a plain JSON answer with its HTTP status; once a stream has begun
it can only be one last SSE event, which the OpenAI SDK raises as an APIError.

Engines shape their errors differently (llama.cpp puts its HTTP status in an
integer ``code``, vLLM puts the fields at the top level), so an engine's error
answer is reshaped by ``engine_error_body``: its own message and type, in
OpenAI's fields.
"""

from __future__ import annotations

import json
from typing import Any

TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    502: "upstream_error",
    503: "service_unavailable",
    504: "timeout_error",
}


def error_type(status: int) -> str:
    """OpenAI's error type for an HTTP status: a client's mistake unless the server failed."""
    return TYPES.get(status, "invalid_request_error" if 400 <= status < 500 else "api_error")


def error_document(status: int, message: str, code: str | None = None, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": error_type(status), "param": param, "code": code}}


def error_body(status: int, message: str, code: str | None = None, param: str | None = None) -> bytes:
    return json.dumps(error_document(status, message, code, param)).encode()


def sse_error_event(message: str, code: str = "stream_broken") -> bytes:
    return b"data: " + json.dumps(error_document(502, message, code)).encode() + b"\n\n"


def engine_error_body(status: int, body: bytes) -> bytes:
    """An engine's error answer in OpenAI's shape, keeping its message, type and extra fields.

    ``code`` and ``param`` are strings or null in OpenAI's shape; an engine's
    integer code (llama.cpp repeats the HTTP status there) says nothing the
    status does not, and is left out.
    """
    try:
        parsed: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        parsed = None
    fields = parsed.get("error", parsed) if isinstance(parsed, dict) else None
    if isinstance(fields, str):
        fields = {"message": fields}
    if not isinstance(fields, dict):
        text = body.decode("utf-8", "replace").strip()[:500] or f"HTTP {status} with an empty body"
        fields = {"message": text}
    extra = {k: v for k, v in fields.items() if k not in ("message", "type", "param", "code", "object")}
    shaped = {
        "message": _text(fields.get("message") or fields.get("detail")) or f"the engine answered HTTP {status}",
        "type": fields["type"] if isinstance(fields.get("type"), str) else error_type(status),
        "param": fields["param"] if isinstance(fields.get("param"), str) else None,
        "code": fields["code"] if isinstance(fields.get("code"), str) else None,
        **extra,
    }
    return json.dumps({"error": shaped}, ensure_ascii=False).encode()


def _text(value: Any) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    return json.dumps(value, ensure_ascii=False)
