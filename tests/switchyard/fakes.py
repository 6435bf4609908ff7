"""A scripted OpenAI-compatible replica, for what a random tiny model cannot do on demand.

A real llama-server with random weights never emits a tool call or a refusal,
so the cascade's validation, tool-call pass-through and exact eval scores are
tested against this fake, which answers each request from a script of
recorded answers (keyed by the last user message). It can also fail in the
ways replicas fail: an HTTP 500, a connection dropped before the first byte,
a stream broken midway, a slow answer.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class Reply:
    content: str | None = ""
    tool_calls: list[dict[str, Any]] = field(
        default_factory=list
    )  # [{"name":..., "arguments": "<json text>"}]
    finish_reason: str = "stop"
    status: int = 200
    delay_s: float = 0.0  # before the first byte
    token_delay_s: float = 0.0  # between stream chunks
    fail: str | None = None  # "drop" (close before any byte) or "midstream" (break after two chunks)
    completion_tokens: int = 7
    piece_chars: int = 4  # characters of content per stream chunk


def call(name: str, arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}


class FakeReplica:
    """Serves /v1/chat/completions, /v1/completions and /health on 127.0.0.1, in a thread."""

    def __init__(self, name: str, script: dict[str, Reply] | None = None, default: Reply | None = None):
        self.name = name
        self.script = dict(script or {})
        self.default = default or Reply(content=f"answer from {name}")
        self.bodies: list[dict[str, Any]] = []
        self.healthy = True
        self.health_checks = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # -- the app ------------------------------------------------------------------------------

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self._complete, methods=["POST"]),
                Route("/v1/completions", self._complete, methods=["POST"]),
                Route("/health", self._health, methods=["GET"]),
            ]
        )

    async def _health(self, request: Request) -> Response:
        self.health_checks += 1
        return JSONResponse({"status": "ok"}, status_code=200 if self.healthy else 503)

    async def _complete(self, request: Request) -> Response:
        body = await request.json()
        self.bodies.append(body)
        reply = self.reply_for(body)
        await asyncio.sleep(reply.delay_s)
        if reply.fail == "drop":
            # The head goes out, then the connection closes before any body byte.
            return StreamingResponse(_dropped(), media_type="text/event-stream")
        if reply.status != 200:
            return JSONResponse(
                {"error": {"message": f"{self.name} failed on purpose", "code": reply.status}},
                status_code=reply.status,
            )
        if body.get("stream"):
            return StreamingResponse(self._chunks(body, reply), media_type="text/event-stream")
        return JSONResponse(self._completion(body, reply))

    def reply_for(self, body: dict[str, Any]) -> Reply:
        text = ""
        for message in body.get("messages") or []:
            if message.get("role") == "user":
                text = message.get("content") or ""
        return self.script.get(text or body.get("prompt", ""), self.default)

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": f"call_{i}", "type": "function", "function": c} for i, c in enumerate(reply.tool_calls)
            ]
        return {
            "id": "cmpl-fake",
            "object": "chat.completion",
            "created": 0,  # fixed, so two answers to one request compare byte for byte (as streamed ones do)
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": self._usage(reply),
        }

    def _usage(self, reply: Reply) -> dict[str, int]:
        return {
            "prompt_tokens": 5,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": 5 + reply.completion_tokens,
        }

    async def _chunks(self, body: dict[str, Any], reply: Reply):
        for n, delta in enumerate(self._deltas(reply)):
            if reply.fail == "midstream" and n == 2:
                raise _Drop()
            yield _event(body, {"index": 0, "delta": delta, "finish_reason": None})
            await asyncio.sleep(reply.token_delay_s)
        yield _event(body, {"index": 0, "delta": {}, "finish_reason": reply.finish_reason})
        if (body.get("stream_options") or {}).get("include_usage"):
            yield _event(body, None, usage=self._usage(reply))
        yield b"data: [DONE]\n\n"

    def _deltas(self, reply: Reply):
        yield {"role": "assistant", "content": None}
        text = reply.content or ""
        step = reply.piece_chars
        for i in range(0, len(text), step):
            yield {"content": text[i : i + step]}
        for i, c in enumerate(reply.tool_calls):
            half = len(c["arguments"]) // 2
            yield {
                "tool_calls": [
                    {
                        "index": i,
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c["arguments"][:half]},
                    }
                ]
            }
            yield {"tool_calls": [{"index": i, "function": {"arguments": c["arguments"][half:]}}]}

    # -- running ------------------------------------------------------------------------------

    def start(self) -> FakeReplica:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self._sock = sock
        self._server = uvicorn.Server(
            uvicorn.Config(self.app(), log_level="critical", lifespan="off", timeout_graceful_shutdown=1)
        )
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name=f"fake-{self.name}", daemon=True
        )
        self._thread.start()
        pause = threading.Event()
        while not self._server.started and self._thread.is_alive():
            pause.wait(0.01)
        assert self._server.started, f"the fake replica {self.name} did not start"
        return self

    def request_stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True

    def stop(self) -> None:
        if self._server is not None:
            self.request_stop()
            self._thread.join(10)
            self._sock.close()

    def __enter__(self) -> FakeReplica:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class _Drop(Exception):
    """Raised inside a streaming answer: uvicorn then closes the connection mid-answer."""


async def _dropped():
    raise _Drop()
    yield b""  # an async generator that fails at its first step


def _event(body: dict[str, Any], choice: dict[str, Any] | None, usage: dict | None = None) -> bytes:
    chunk: dict[str, Any] = {
        "id": "cmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": body["model"],
        "choices": [choice] if choice else [],
    }
    if usage is not None:
        chunk["usage"] = usage
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"
