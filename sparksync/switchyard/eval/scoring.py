"""Score one answer against one case, on a 0-1 scale (reports show 0-100).

The tool name must match exactly. Arguments are compared through the tool's
JSON schema, so they match when they mean the same thing to the tool:

- numbers compare as numbers (3 == 3.0; "3" counts only where the schema says number);
- strings compare trimmed, and case-blind unless the rule says otherwise; those with a
  ``date``, ``date-time`` or ``time`` format compare as moments (15:00 == 15:00:00);
- booleans accept "true"/"false" where the schema says boolean;
- an array with ``uniqueItems`` is a set (order does not matter), else a sequence;
- objects compare key by key with each property's schema;
- an argument the model left out matches when the schema's default equals the expected value.

Several expected calls (in any order) score the mean of their best matches; a
case that expects no call scores 1 for any answer without one. A file or case
whose rule is ``bfcl`` is scored by BFCL's own rules instead (``bfcl_rules``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime
from datetime import time as dt_time
from typing import Any

from sparksync.switchyard.answer import Answer, ToolCall
from sparksync.switchyard.eval import bfcl_rules
from sparksync.switchyard.eval.cases import Case, CaseFile, Expect, Scoring

_MISSING = object()


@dataclass
class CaseScore:
    case_id: str
    score: float
    name_ok: bool = False
    args_matched: int = 0
    args_expected: int = 0
    notes: list[str] = field(default_factory=list)


def score_case(cases: CaseFile, case: Case, answer: Answer) -> CaseScore:
    rule = cases.scoring_of(case)
    schemas = {t.function.name: t.function.parameters for t in cases.tools_of(case)}
    if rule.rule == "bfcl":
        problems = bfcl_rules.check(case, answer, schemas)
        return CaseScore(case.id, 0.0 if problems else 1.0, name_ok=not problems, notes=problems)
    if case.expect.answer_pattern is not None:
        return _score_text(case, answer, rule)
    if case.expect.no_call:
        if answer.tool_calls:
            return CaseScore(case.id, 0.0, notes=[f"expected no tool call, got {answer.tool_calls[0].name!r}"])
        return CaseScore(case.id, 1.0, name_ok=True)
    if case.expect.tool_calls is not None:
        return _score_calls(case, answer, rule, schemas)
    return _score_call(case, answer, rule, schemas)


def _score_text(case: Case, answer: Answer, rule: Scoring) -> CaseScore:
    if answer.tool_calls:
        return CaseScore(
            case.id, 0.0, notes=[f"expected a text answer, got a call to {answer.tool_calls[0].name!r}"]
        )
    flags = 0 if rule.case_sensitive else re.IGNORECASE
    if re.search(case.expect.answer_pattern or "", answer.content, flags):
        return CaseScore(case.id, 1.0, name_ok=True)
    return CaseScore(case.id, 0.0, notes=[f"answer does not match /{case.expect.answer_pattern}/"])


def _score_calls(case: Case, answer: Answer, rule: Scoring, schemas: dict[str, dict]) -> CaseScore:
    """Several expected calls in any order: each takes the answer's best-scoring call not yet taken;
    the case scores the mean, and nothing when the number of calls differs."""
    expected = case.expect.calls()
    if len(answer.tool_calls) != len(expected):
        return CaseScore(case.id, 0.0, notes=[f"expected {len(expected)} call(s), got {len(answer.tool_calls)}"])
    left, scores, notes = list(answer.tool_calls), [], []
    for want in expected:
        single = case.model_copy(update={"expect": Expect(tool_call=want)})
        options = [(_score_call(single, Answer("", [call]), rule, schemas), call) for call in left]
        best, call = max(options, key=lambda option: option[0].score)
        left.remove(call)
        scores.append(best.score)
        notes += [f"{want.name}: {note}" for note in best.notes]
    return CaseScore(case.id, sum(scores) / len(scores), name_ok=all(s > 0 for s in scores), notes=notes)


def _score_call(case: Case, answer: Answer, rule: Scoring, schemas: dict[str, dict]) -> CaseScore:
    expected = case.expect.tool_call
    assert expected is not None
    result = CaseScore(case.id, 0.0, args_expected=len(expected.arguments))
    if not answer.tool_calls:
        result.notes.append(f"expected a call to {expected.name!r}; got a text answer")
        return result
    candidates = [c for c in answer.tool_calls if c.name == expected.name]
    if not candidates:
        result.notes.append(f"expected a call to {expected.name!r}; got {answer.tool_calls[0].name!r}")
        return result
    # Of several calls to the expected tool, the one that matches best counts.
    scored = [_score_arguments(case, c, rule, schemas.get(expected.name, {})) for c in candidates]
    return max(scored, key=lambda r: r.score)


def _score_arguments(case: Case, call: ToolCall, rule: Scoring, schema: dict) -> CaseScore:
    expected = case.expect.tool_call
    assert expected is not None
    result = CaseScore(case.id, 0.0, name_ok=True, args_expected=len(expected.arguments))
    try:
        actual = call.parsed_arguments()
    except ValueError:
        result.notes.append("the arguments are not JSON")
        return _finish(result, rule)
    _compare_arguments(expected.arguments, actual, schema, rule, result)
    return _finish(result, rule)


def _compare_arguments(expected: dict, actual: Any, schema: dict, rule: Scoring, result: CaseScore) -> None:
    if not isinstance(actual, dict):
        result.notes.append("the arguments are not a JSON object")
        return
    properties = schema.get("properties") or {}
    for key, want in expected.items():
        prop = properties.get(key) or {}
        got = actual.get(key, prop.get("default", _MISSING))
        problem = "missing" if got is _MISSING else mismatch(want, got, prop, rule)
        if problem:
            result.notes.append(f"argument {key}: {problem}")
        else:
            result.args_matched += 1
    if rule.extra_arguments == "fail":
        extra = sorted(set(actual) - set(expected))
        if extra:
            result.notes.append(f"unexpected argument(s): {', '.join(extra)}")


def _finish(result: CaseScore, rule: Scoring) -> CaseScore:
    all_match = result.args_matched == result.args_expected and not result.notes
    if rule.rule == "exact":
        result.score = 1.0 if result.name_ok and all_match else 0.0
    else:
        share = result.args_matched / result.args_expected if result.args_expected else 1.0
        result.score = 0.5 + 0.5 * share if result.name_ok else 0.0
    return result


def mismatch(want: Any, got: Any, schema: dict, rule: Scoring) -> str | None:
    """None when ``got`` means ``want`` under ``schema``, else a short description of the difference."""
    kind = _kind(schema, want)
    compare = _COMPARERS.get(kind, _same_json)
    return compare(want, got, schema, rule)


def _kind(schema: dict, want: Any) -> str:
    declared = schema.get("type")
    if isinstance(declared, list):  # e.g. ["string", "null"]: the type of the expected value decides
        declared = next((t for t in declared if t != "null" and t == _json_kind(want)), None)
    return declared or _json_kind(want)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    kinds: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return kinds.get(type(value), "null")


def _number(want: Any, got: Any, schema: dict, rule: Scoring) -> str | None:
    if isinstance(got, str) and "type" not in schema:
        return f"expected the number {want!r}, got the string {got!r}"  # only a schema licenses "3" for 3
    try:
        w, g = float(want), float(got)
    except (TypeError, ValueError):
        return f"expected {want!r}, got {got!r}"
    if isinstance(got, bool) or abs(w - g) > rule.number_tolerance * max(1.0, abs(w)):
        return f"expected {want!r}, got {got!r}"
    return None


def _string(want: Any, got: Any, schema: dict, rule: Scoring) -> str | None:
    if not isinstance(got, str):
        return f"expected the string {want!r}, got {got!r}"
    moment = _PARSERS.get(schema.get("format", ""))
    if moment is not None:
        try:
            return (
                None
                if moment(str(want).strip()) == moment(got.strip())
                else f"expected {want!r}, got {got!r}"
            )
        except ValueError:
            pass  # not a well-formed value: compare as plain text below
    w, g = str(want).strip(), got.strip()
    if not rule.case_sensitive:
        w, g = w.casefold(), g.casefold()
    return None if w == g else f"expected {want!r}, got {got!r}"


def _boolean(want: Any, got: Any, schema: dict, rule: Scoring) -> str | None:
    if isinstance(got, str) and "type" in schema and got.strip().lower() in ("true", "false"):
        got = got.strip().lower() == "true"
    return (
        None if got is want or (isinstance(got, bool) and got == want) else f"expected {want!r}, got {got!r}"
    )


def _array(want: Any, got: Any, schema: dict, rule: Scoring) -> str | None:
    if not isinstance(got, list) or len(got) != len(want):
        return f"expected {len(want)} item(s) {want!r}, got {got!r}"
    items: dict = schema["items"] if isinstance(schema.get("items"), dict) else {}
    if schema.get("uniqueItems"):
        return _unordered(want, got, items, rule)
    for i, (w, g) in enumerate(zip(want, got)):
        problem = mismatch(w, g, items, rule)
        if problem:
            return f"item {i}: {problem}"
    return None


def _unordered(want: list, got: list, items: dict, rule: Scoring) -> str | None:
    left = list(got)
    for w in want:
        match = next((i for i, g in enumerate(left) if mismatch(w, g, items, rule) is None), None)
        if match is None:
            return f"no item matches {w!r} in {got!r}"
        left.pop(match)
    return None


def _object(want: Any, got: Any, schema: dict, rule: Scoring) -> str | None:
    if not isinstance(want, dict) or not isinstance(got, dict):
        return f"expected an object {want!r}, got {got!r}"
    properties = schema.get("properties") or {}
    for key, w in want.items():
        prop = properties.get(key) or {}
        g = got.get(key, prop.get("default", _MISSING))
        problem = "missing" if g is _MISSING else mismatch(w, g, prop, rule)
        if problem:
            return f"{key}: {problem}"
    if rule.extra_arguments == "fail" and set(got) - set(want):
        return f"unexpected key(s) {sorted(set(got) - set(want))}"
    return None


def _same_json(want: Any, got: Any, schema: dict, rule: Scoring) -> str | None:
    return None if want == got else f"expected {want!r}, got {got!r}"


# Formats whose values have several spellings: 15:00 and 15:00:00 are the same time.
_PARSERS = {"date-time": datetime.fromisoformat, "date": date.fromisoformat, "time": dt_time.fromisoformat}

_COMPARERS = {
    "number": _number,
    "integer": _number,
    "string": _string,
    "boolean": _boolean,
    "array": _array,
    "object": _object,
}
