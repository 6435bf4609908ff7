"""Error answers in the shape OpenAI clients expect: {"error": {"message", "type", "param", "code"}}.

Every message says what went wrong and what to do next. Before the first byte
an error is a plain JSON answer with its HTTP status; once a stream has begun
it can only be one last SSE event, which the OpenAI SDK raises as an APIError.
"""

from __future__ import annotations

import json

TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    413: "invalid_request_error",
    502: "upstream_error",
    503: "service_unavailable",
    504: "timeout_error",
}


def error_document(status: int, message: str, code: str | None = None, param: str | None = None) -> dict:
    return {
        "error": {"message": message, "type": TYPES.get(status, "api_error"), "param": param, "code": code}
    }


def error_body(status: int, message: str, code: str | None = None, param: str | None = None) -> bytes:
    return json.dumps(error_document(status, message, code, param)).encode()


def sse_error_event(message: str, code: str = "stream_broken") -> bytes:
    return b"data: " + json.dumps(error_document(502, message, code)).encode() + b"\n\n"
