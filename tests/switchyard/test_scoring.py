"""Scoring, against model answers recorded for the example cases, with scores worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparksync.switchyard.answer import Answer, StreamAssembler, from_completion
from sparksync.switchyard.eval.cases import Scoring, example_cases_path, load_cases
from sparksync.switchyard.eval.runner import CaseRun, Target, TargetRun
from sparksync.switchyard.eval.scoring import mismatch, score_case
from sparksync.switchyard.sse import SseScanner, load_payload

RECORDINGS = json.loads((Path(__file__).parent / "fixtures" / "recorded_answers.json").read_text())[
    "recordings"
]
CASES = load_cases(example_cases_path())
BY_ID = {c.id: c for c in CASES.cases}


def recorded_answer(recording: dict) -> Answer:
    if "response" in recording:
        return from_completion(recording["response"])
    assembler = StreamAssembler()
    for payload in SseScanner().feed(recording["stream"].encode()):
        if (chunk := load_payload(payload)) is not None:
            assembler.feed(chunk)
    return assembler.finish()


@pytest.mark.parametrize("recording", RECORDINGS, ids=[f"{r['case']}: {r['note']}" for r in RECORDINGS])
def test_recorded_answer_scores_as_worked_out_by_hand(recording):
    result = score_case(CASES, BY_ID[recording["case"]], recorded_answer(recording))
    assert result.score == pytest.approx(recording["expected_score"]), result.notes


def test_the_report_score_is_the_mean_on_a_0_to_100_scale():
    runs = [
        CaseRun(score_case(CASES, BY_ID[r["case"]], recorded_answer(r)), "small", 10, 0.1) for r in RECORDINGS
    ]
    run = TargetRun(Target("gateway", "switchyard"), runs, wall_s=2.0)
    assert run.score == pytest.approx(100 * 14.625 / 25)  # the hand-worked scores add up to 14.625
    assert run.share() == {"small": 1.0} and run.output_tokens == 250


def test_every_example_case_scores_full_marks_with_its_own_expectation():
    for case in CASES.cases:
        if case.expect.tool_call is not None:
            call = case.expect.tool_call
            answer = Answer("", [_call(call.name, call.arguments)])
        else:
            answer = Answer(
                {
                    "no-tool-arithmetic": "144",
                    "no-tool-thanks": "You're welcome!",
                    "history-use-result": "31 °C, no jacket needed.",
                }[case.id]
            )
        assert score_case(CASES, case, answer).score == 1.0, case.id


def _call(name: str, arguments: dict):
    from sparksync.switchyard.answer import ToolCall

    return ToolCall(name, json.dumps(arguments))


RULE = Scoring()


@pytest.mark.parametrize(
    ("want", "got", "schema", "same"),
    [
        ({"a": [1, 2]}, {"a": [1, 2], "b": 0}, {"type": "object"}, True),
        ({"a": [1, 2]}, {"a": [2, 1]}, {"type": "object", "properties": {"a": {"type": "array"}}}, False),
        ([1, 2], [2, 1], {"type": "array", "uniqueItems": True}, True),
        ([1, 2], [1, 2, 2], {"type": "array", "uniqueItems": True}, False),
        ("x", None, {"type": ["string", "null"]}, False),
        (None, None, {"type": ["string", "null"]}, True),
        (3, True, {"type": "integer"}, False),
        (3, 3.4, {"type": "integer"}, False),
        (
            "2026-12-02",
            "2026-12-2",
            {"type": "string", "format": "date"},
            False,
        ),  # not ISO: plain text compare
        ("20:30", "20:30:00", {"type": "string", "format": "time"}, True),
        ("A", "a", {"type": "string"}, True),
        (7, "7", {}, False),  # no schema: the expected value's JSON type decides, and "7" is a string
    ],
)
def test_schema_aware_comparison(want, got, schema, same):
    assert (mismatch(want, got, schema, RULE) is None) is same


def test_case_sensitive_rule():
    assert mismatch("A", "a", {"type": "string"}, Scoring(case_sensitive=True)) is not None
