"""What a policy may look at in a request, read once from its JSON body.

Only cheap facts: no tokenizer is loaded (the gateway does not know the
pools' vocabularies), so the prompt length is estimated at four characters a token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 4
# How much reasoning each requested effort level counts for (1.0 = full weight).
EFFORT_LEVELS = {"none": 0.0, "minimal": 0.0, "low": 0.25, "medium": 0.5, "high": 1.0, "xhigh": 1.0}


@dataclass(frozen=True)
class RequestFeatures:
    endpoint: str  # "chat" or "completions"
    prompt_chars: int
    n_tools: int
    tool_rounds: int
    reasoning: float  # 0..1: how much reasoning the client asked for
    max_tokens: int | None
    last_user_text: str
    demands_tool_call: bool

    @property
    def prompt_tokens(self) -> int:
        return math.ceil(self.prompt_chars / CHARS_PER_TOKEN)


def extract(body: dict[str, Any], endpoint: str) -> RequestFeatures:
    messages = body.get("messages") if endpoint == "chat" else None
    messages = messages if isinstance(messages, list) else []
    prompt = "".join(_text(m.get("content")) for m in messages if isinstance(m, dict))
    if endpoint == "completions":
        prompt = _prompt_text(body.get("prompt"))
    tools = body.get("tools")
    return RequestFeatures(
        endpoint=endpoint,
        prompt_chars=len(prompt),
        n_tools=len(tools) if isinstance(tools, list) else 0,
        tool_rounds=sum(
            1
            for m in messages
            if isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls")
        ),
        reasoning=_reasoning(body),
        max_tokens=_max_tokens(body),
        last_user_text=_last_user_text(messages) if endpoint == "chat" else prompt,
        demands_tool_call=demands_tool_call(body.get("tool_choice")),
    )


def _text(content: Any) -> str:
    """A message's text, whether a string or a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        return "".join(p for p in prompt if isinstance(p, str))
    return ""


def _last_user_text(messages: list) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _text(message.get("content"))
    return ""


def _reasoning(body: dict[str, Any]) -> float:
    effort = body.get("reasoning_effort")
    if effort is None and isinstance(body.get("reasoning"), dict):
        effort = body["reasoning"].get("effort")
    if isinstance(effort, str):
        return EFFORT_LEVELS.get(effort.lower(), 0.5)
    # Qwen-style templates take the switch through chat_template_kwargs (vLLM, llama-server).
    kwargs = body.get("chat_template_kwargs")
    if isinstance(kwargs, dict) and (kwargs.get("enable_thinking") is True or kwargs.get("thinking") is True):
        return 1.0
    return 0.0


def _max_tokens(body: dict[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def demands_tool_call(tool_choice: Any) -> bool:
    return tool_choice == "required" or (
        isinstance(tool_choice, dict) and tool_choice.get("type") == "function"
    )
