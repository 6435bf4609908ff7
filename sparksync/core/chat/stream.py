"""One streamed chat answer from an OpenAI-compatible server, timed as the user sees it.

``stream_answer`` posts the conversation with ``stream: true`` and reads the
server-sent events as they come, handing each piece of text to ``on_text``.
It measures the time to the first piece of text (TTFT) from the moment the
request is sent, and the tokens/s of the answer: the engine's own figure
where it gives one (llama-server's ``timings.predicted_per_second``), else
the tokens it reports in ``usage`` (or the pieces counted) over the time
from the first piece to the last.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from sparksync.core.chat.errors import ChatError

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 120.0  # a big model's first token, on a busy node, may take a while
DEFAULT_MAX_TOKENS = 512


@dataclass(frozen=True)
class Answer:
    text: str
    tokens: int  # as the server counts them (usage), or the pieces received
    ttft_s: float | None  # request sent -> first piece of text
    tokens_per_s: float | None
    finish_reason: str | None
    model: str | None  # the model that answered, as the server names it (a gateway's pick)
    cancelled: bool = False

    def figures(self) -> str:
        """One line for under the answer: "TTFT 42 ms · 812.4 tok/s · 64 tokens"."""
        parts = []
        if self.ttft_s is not None:
            parts.append(f"TTFT {self.ttft_s * 1000:,.0f} ms")
        if self.tokens_per_s is not None:
            parts.append(f"{self.tokens_per_s:,.1f} tok/s")
        parts.append(f"{self.tokens} token{'s' if self.tokens != 1 else ''}")
        if self.model:
            parts.append(self.model.replace("\\", "/").rsplit("/", 1)[-1])  # a GGUF path: its file name
        if self.cancelled:
            parts.append("stopped")
        return " · ".join(parts)


def stream_answer(
    url: str,
    messages: Sequence[dict[str, str]],
    *,
    model: str | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    on_text: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    api_key: str | None = None,
    where: str | None = None,
) -> Answer:
    """Ask ``url`` (``http://host:port``, the server's root) for the next answer to ``messages``.

    ``where`` names the server in errors ("llamacpp-single-1 on spark-2"); ChatError when it fails.
    """
    where = where or url
    body: dict = {"messages": list(messages), "stream": True, "max_tokens": max_tokens,
                  "stream_options": {"include_usage": True}}  # fmt: skip
    if model:
        body["model"] = model
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    pieces: list[str] = []
    state: dict = {"first": None, "last": None, "usage": None, "rate": None, "finish": None, "model": None}
    sent = time.monotonic()
    try:
        with httpx.Client(base_url=url, timeout=timeout, trust_env=False) as http:
            with http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response:
                if response.status_code != 200:
                    response.read()
                    raise ChatError(f"{where} refused the message: {_why(response)}")
                for line in response.iter_lines():
                    if cancel is not None and cancel.is_set():
                        break
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    text = _absorb(json.loads(data), state)
                    if text:
                        now = time.monotonic()
                        state["first"] = state["first"] or now
                        state["last"] = now
                        pieces.append(text)
                        if on_text is not None:
                            on_text(text)
    except httpx.TimeoutException as exc:
        raise ChatError(f"{where} did not answer within {READ_TIMEOUT_S:g} s ({type(exc).__name__}); "
                        "it may be overloaded, or its node unreachable.") from None  # fmt: skip
    except httpx.HTTPError as exc:
        raise ChatError(f"{where} does not answer ({exc or type(exc).__name__}): the engine may have "
                        "stopped, or its tunnel is down. Check the Workloads tab.") from None  # fmt: skip
    except json.JSONDecodeError as exc:
        raise ChatError(f"{where} sent something that is not a chat stream ({exc}); "
                        "is it an OpenAI-compatible server?") from None  # fmt: skip
    return _answer(pieces, state, sent, cancelled=cancel is not None and cancel.is_set())


def _absorb(chunk: dict, state: dict) -> str:
    """Note what one event says (usage, the engine's timings, the finish); return its text."""
    if chunk.get("usage"):
        state["usage"] = chunk["usage"]
    timings = chunk.get("timings") or {}
    if timings.get("predicted_per_second"):
        state["rate"] = float(timings["predicted_per_second"])
    state["model"] = chunk.get("model") or state["model"]
    text = ""
    for choice in chunk.get("choices") or ():
        delta = choice.get("delta") or {}
        text += delta.get("content") or ""
        state["finish"] = choice.get("finish_reason") or state["finish"]
    return text


def _answer(pieces: list[str], state: dict, sent: float, cancelled: bool) -> Answer:
    usage = state["usage"] or {}
    tokens = int(usage.get("completion_tokens") or len(pieces))
    first, last = state["first"], state["last"]
    rate = state["rate"]
    if rate is None and first is not None and last is not None and last > first and tokens > 1:
        rate = (tokens - 1) / (last - first)  # the first token's time is the TTFT's
    return Answer(
        text="".join(pieces),
        tokens=tokens,
        ttft_s=first - sent if first is not None else None,
        tokens_per_s=rate,
        finish_reason=state["finish"],
        model=state["model"],
        cancelled=cancelled,
    )


def _why(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict):
        return str(error.get("message") or error)
    if isinstance(error, str):
        return error
    return response.text[:200].strip() or response.reason_phrase
