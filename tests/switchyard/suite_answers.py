"""Right answers to converted BFCL cases, built from each case's own possible answers (BFCL's ground truth)."""

from __future__ import annotations

import json

from sparksync.switchyard.answer import Answer, ToolCall
from sparksync.switchyard.eval.cases import Case
from tests.switchyard.fakes import Reply, call


def right_answer(case: Case) -> Answer:
    """A call built from the first acceptable value of each argument (no call for irrelevance)."""
    if case.expect.no_call:
        return Answer("Nothing I can call does that.")
    calls = []
    for want in case.expect.calls():
        # BFCL's data lists a few optional arguments its function does not have: a model must leave those out.
        known = next(t.function.parameters["properties"] for t in case.tools if t.function.name == want.name)
        assert want.one_of is not None
        arguments = {k: _value(values) for k, values in want.one_of.items() if k in known and _first(values) != ""}
        calls.append(ToolCall(want.name, json.dumps(arguments)))
    return Answer("", calls)


def right_reply(case: Case) -> Reply:
    """The same answer, as a scripted replica sends it."""
    answer = right_answer(case)
    if not answer.tool_calls:
        return Reply(content=answer.content)
    calls = [call(c.name, c.arguments) for c in answer.tool_calls]
    return Reply(content=None, tool_calls=calls, finish_reason="tool_calls")


def last_user_text(case: Case) -> str:
    return [m["content"] for m in case.messages if m["role"] == "user"][-1]


def _first(values):
    return next((v for v in values if v != ""), "")


def _value(values):
    value = _first(values)
    if isinstance(value, dict):  # an object's acceptable values, key by key
        return {k: _first(v) for k, v in value.items() if _first(v) != ""}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [{k: _first(v) for k, v in item.items() if _first(v) != ""} for item in value]
    return value


def bfcl_scripts(cases, large_delay_s: float = 0.0) -> tuple[dict[str, Reply], dict[str, Reply]]:
    """Scripts for two replicas: large answers every case right; small gets the single calls right
    and botches the parallel ones (a text answer)."""
    large = {last_user_text(c): right_reply(c) for c in cases.cases}
    for reply in large.values():
        reply.delay_s = large_delay_s
    small = {
        last_user_text(c): right_reply(c) if c.category != "parallel" else Reply(content="I'd rather not.")
        for c in cases.cases
    }
    return small, large
