"""Bearer-token check for every request.

A pure ASGI middleware rather than a FastAPI dependency, so that no route,
including the OpenAPI document and any added later, can forget it.
"""

from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Receive, Scope, Send

from sparksync_agent.protocol import ErrorBody

_UNAUTHORIZED = json.dumps(
    ErrorBody(
        error="unauthorized",
        message="missing or wrong bearer token; read it from the agent's state directory (file 'token')",
    ).model_dump()
).encode()


class BearerTokenMiddleware:
    def __init__(self, app: ASGIApp, token: str, public_paths: frozenset[str] = frozenset()):
        self.app = app
        self._expected = f"Bearer {token}".encode()
        self._public = public_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self._public or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
            }
        )
        await send({"type": "http.response.body", "body": _UNAUTHORIZED})

    def _authorized(self, scope: Scope) -> bool:
        for name, value in scope["headers"]:
            if name == b"authorization":
                # Constant-time compare: the token must not leak through timing.
                return hmac.compare_digest(value, self._expected)
        return False
