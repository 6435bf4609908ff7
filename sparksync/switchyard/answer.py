"""A model's answer, assembled from a whole completion or from its stream of chunks.

The cascade validates it and the eval scores it, so both see the same thing
whichever way the answer travelled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolCall:
    name: str
    arguments: str  # as the model wrote it: a JSON text that may not parse
    id: str | None = None

    def parsed_arguments(self) -> Any:
        """The arguments as JSON; raises ValueError when they do not parse."""
        return json.loads(self.arguments) if self.arguments.strip() else {}


@dataclass
class Answer:
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)

    @property
    def completion_tokens(self) -> int | None:
        value = self.usage.get("completion_tokens")
        return value if isinstance(value, int) else None


def from_completion(document: dict[str, Any]) -> Answer:
    """Read a non-streamed chat.completion or text_completion."""
    choices = document.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    content = message.get("content") if "message" in choice else choice.get("text")
    calls = [_call_from_message(c) for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    usage = document.get("usage")
    return Answer(content or "", calls, choice.get("finish_reason"), usage if isinstance(usage, dict) else {})


def _call_from_message(call: dict[str, Any]) -> ToolCall:
    function = call.get("function") or {}
    arguments = function.get("arguments")
    if not isinstance(arguments, str):  # some servers send an object; keep it comparable
        arguments = json.dumps(arguments) if arguments is not None else ""
    return ToolCall(function.get("name") or "", arguments, call.get("id"))


class StreamAssembler:
    """Feed it the parsed ``data:`` payloads of a stream, in order; ``answer`` is the result."""

    def __init__(self) -> None:
        self.answer = Answer()
        self._calls: dict[int, ToolCall] = {}
        self._parts: list[str] = []

    def feed(self, chunk: dict[str, Any]) -> None:
        if isinstance(chunk.get("usage"), dict):
            self.answer.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict):
                self._feed_choice(choice)

    def _feed_choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta") or {}
        text = delta.get("content") if "delta" in choice else choice.get("text")
        if isinstance(text, str):
            self._parts.append(text)
        for piece in delta.get("tool_calls") or []:
            self._feed_call(piece)
        if choice.get("finish_reason"):
            self.answer.finish_reason = choice["finish_reason"]

    def _feed_call(self, piece: dict[str, Any]) -> None:
        # Deltas of one call share an index; the name comes once, the arguments in pieces.
        call = self._calls.setdefault(piece.get("index", 0), ToolCall("", ""))
        call.id = piece.get("id") or call.id
        function = piece.get("function") or {}
        call.name += function.get("name") or ""
        call.arguments += function.get("arguments") or ""

    def finish(self) -> Answer:
        self.answer.content = "".join(self._parts)
        self.answer.tool_calls = [self._calls[i] for i in sorted(self._calls)]
        return self.answer
