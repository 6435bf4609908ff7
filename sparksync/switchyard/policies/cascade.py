"""Cascade: the small pool answers first; an answer that fails validation escalates to the large pool.

An answer fails when:

- a tool call names no offered tool, or its arguments are not JSON, or do not
  validate against that tool's JSON schema;
- it is empty (no text and no tool call);
- its text starts like a refusal (configurable patterns);
- the request demanded a tool call (``tool_choice``) and none came;
- optionally, it was cut short by max_tokens.

The small answer is held back until it has passed (see docs/switchyard.md for
what that costs a streaming client); the large pool's answer is final and streams live.
With a ``threshold``, requests the rules policy scores at or above it skip the
small pool and go straight to the large one (no escalation to wait for).
"""

from __future__ import annotations

import re
from typing import Any

import jsonschema

from sparksync.switchyard.answer import Answer, ToolCall
from sparksync.switchyard.config import CascadePolicyConfig, RulesPolicyConfig
from sparksync.switchyard.features import RequestFeatures, demands_tool_call
from sparksync.switchyard.policies.base import Decision, Policy
from sparksync.switchyard.policies.rules import RulesPolicy


class CascadePolicy(Policy):
    name = "cascade"

    def __init__(self, config: CascadePolicyConfig):
        super().__init__(config.small, config.large)
        self.config = config
        self._refusals = [re.compile(p, re.IGNORECASE) for p in config.refusal_patterns]
        self._rules = None if config.threshold is None else RulesPolicy(RulesPolicyConfig(
            kind="rules", small=config.small, large=config.large, threshold=config.threshold,
            weights=config.weights, keywords=config.keywords,
        ))  # fmt: skip

    def decide(self, features: RequestFeatures, *, commit: bool = True) -> Decision:
        if self._rules is not None:
            scored = self._rules.decide(features, commit=commit)
            if scored.pool == self.large:
                return Decision(self.large, self.name, f"straight to {self.large}: {scored.reason}",
                                scored.details, score=scored.score)  # fmt: skip
        details = (
            f"{self.small} answers first; its answer is validated before any byte reaches the client,",
            f"and an answer that fails validation is retried on {self.large}, which streams live.",
        )
        return Decision(
            self.small,
            self.name,
            f"small first, {self.large} if the answer fails validation",
            details,
            escalate_to=self.large,
        )

    def failures(self, answer: Answer, request: dict[str, Any]) -> list[str]:
        """Why ``answer`` is not good enough (empty list: it passes)."""
        problems = []
        tools = _tool_schemas(request.get("tools"))
        for call in answer.tool_calls:
            problems += _call_problems(call, tools)
        text = answer.content.strip()
        if not text and not answer.tool_calls:
            problems.append("empty answer")
        if text and any(p.search(text) for p in self._refusals):
            problems.append(f"refusal: {text[:60]!r}")
        if (
            self.config.require_demanded_tool_call
            and demands_tool_call(request.get("tool_choice"))
            and not answer.tool_calls
        ):
            problems.append("tool_choice demanded a tool call and none came")
        if self.config.escalate_on_truncation and answer.finish_reason == "length":
            problems.append("cut short by max_tokens")
        return problems


def _tool_schemas(tools: Any) -> dict[str, dict]:
    """Offered function name -> its parameters schema ({} accepts anything)."""
    schemas = {}
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            params = function.get("parameters")
            schemas[function["name"]] = params if isinstance(params, dict) else {}
    return schemas


def _call_problems(call: ToolCall, tools: dict[str, dict]) -> list[str]:
    if call.name not in tools:
        return [f"tool call to {call.name!r}, which was not offered"]
    try:
        arguments = call.parsed_arguments()
    except ValueError:
        return [f"tool call to {call.name!r}: arguments are not JSON: {call.arguments[:60]!r}"]
    try:
        jsonschema.validate(arguments, tools[call.name])
    except jsonschema.ValidationError as exc:
        return [f"tool call to {call.name!r}: arguments fail the schema: {exc.message}"]
    except jsonschema.SchemaError:
        return []  # the client's schema is broken, not the model's answer: let it through
    return []
