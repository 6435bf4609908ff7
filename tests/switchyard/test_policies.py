"""The three policies, on request features alone (no network)."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import pytest

from sparksync.switchyard import features
from sparksync.switchyard.answer import Answer, ToolCall
from sparksync.switchyard.config import CascadePolicyConfig, RulesPolicyConfig
from sparksync.switchyard.policies import CascadePolicy, FixedSharePolicy, RulesPolicy

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city"],
        },
    },
}


def chat(text: str, **extra) -> features.RequestFeatures:
    return features.extract(
        {"model": "switchyard", "messages": [{"role": "user", "content": text}], **extra}, "chat"
    )


# -- features -----------------------------------------------------------------------------------


def test_features_read_from_a_chat_body():
    body = {
        "messages": [
            {"role": "system", "content": "x" * 400},
            {"role": "user", "content": [{"type": "text", "text": "y" * 396}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "1", "content": "zz"},
            {"role": "user", "content": "now prove it"},
        ],
        "tools": [WEATHER_TOOL, WEATHER_TOOL],
        "reasoning_effort": "medium",
        "max_completion_tokens": 2000,
        "tool_choice": "required",
    }
    f = features.extract(body, "chat")
    assert (f.prompt_chars, f.prompt_tokens) == (400 + 396 + 2 + 12, 203)
    assert (f.n_tools, f.tool_rounds, f.reasoning, f.max_tokens) == (2, 1, 0.5, 2000)
    assert f.last_user_text == "now prove it" and f.demands_tool_call


def test_features_of_a_completions_body_and_thinking_switch():
    f = features.extract(
        {"prompt": "abcd" * 10, "max_tokens": 7, "chat_template_kwargs": {"enable_thinking": True}},
        "completions",
    )
    assert (f.prompt_tokens, f.max_tokens, f.reasoning, f.n_tools) == (10, 7, 1.0, 0)


# -- rules --------------------------------------------------------------------------------------


def rules(**overrides) -> RulesPolicy:
    return RulesPolicy(RulesPolicyConfig(kind="rules", small="s", large="l", **overrides))


def test_rules_short_plain_question_goes_small_with_its_score():
    decision = rules().decide(chat("What is the capital of France?"))
    assert decision.pool == "s" and decision.score == pytest.approx(0.002)  # 30 characters: ~8 tokens
    # The prompt's 0.002 counts in the score; a reason that would read "+0.00" is left out.
    assert decision.reason == "score 0.00 < 1"
    assert decision.details == ("(no feature adds 0.01 or more to the score)",)


def test_rules_each_feature_adds_its_weighted_points():
    f = chat(
        "Please debug this step by step", tools=[WEATHER_TOOL] * 3, reasoning_effort="high", max_tokens=4000
    )
    decision = rules().decide(f)
    # tools 3 x 0.1, reasoning 1.0, max_tokens 4 x 0.25, keywords debug 0.5 + step by step 0.5, prompt 8 tok
    assert decision.score == pytest.approx(0.3 + 1.0 + 1.0 + 0.5 + 0.5 + 0.002)
    assert decision.pool == "l"
    text = "\n".join(decision.details)
    for why in (
        "+0.30  3 tool(s) offered",
        "+1.00  reasoning requested",
        "+1.00  max_tokens 4000",
        "+0.50  keyword 'debug'",
        "+0.50  keyword 'step by step'",
    ):
        assert why in text


def test_rules_threshold_is_inclusive_and_configurable():
    f = chat("hi", max_tokens=4000)  # exactly 1.0 from max_tokens, plus a tiny prompt
    assert rules(threshold=1.0, weights={"per_1k_prompt_tokens": 0}).decide(f).pool == "l"
    assert rules(threshold=1.01, weights={"per_1k_prompt_tokens": 0}).decide(f).pool == "s"


def test_rules_keywords_are_case_blind_and_replaceable():
    policy = rules(keywords={"Lemma": 5.0})
    assert policy.decide(chat("state the LEMMA")).pool == "l"
    assert policy.decide(chat("prove it")).pool == "s"  # the default keywords were replaced


# -- fixed share --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("share", "n", "large"),
    [
        (Fraction(1, 4), 4000, 1000),
        (Fraction(1, 2), 4000, 2000),
        (Fraction(2, 3), 3000, 2000),
        (Fraction(0), 100, 0),
        (Fraction(1), 100, 100),
    ],
)
def test_fixed_share_is_exact(share, n, large):
    policy = FixedSharePolicy("s", "l", share)
    counts = Counter(policy.decide(chat("x")).pool for _ in range(n))
    assert counts["l"] == large and counts["s"] == n - large


def test_fixed_share_spreads_large_requests_evenly():
    policy = FixedSharePolicy("s", "l", Fraction(1, 4))
    pools = [policy.decide(chat("x")).pool for _ in range(12)]
    assert pools == ["s", "s", "s", "l"] * 3
    # Any window of 4 consecutive requests holds exactly one large one.
    policy = FixedSharePolicy("s", "l", Fraction(1, 4))
    seq = [policy.decide(chat("x")).pool for _ in range(400)]
    assert all(seq[i : i + 4].count("l") == 1 for i in range(len(seq) - 3))


def test_fixed_share_preview_does_not_advance():
    policy = FixedSharePolicy("s", "l", Fraction(1, 2))
    first = policy.decide(chat("x"), commit=False)
    assert first.pool == "s" and "request #1" in first.details[1]
    assert policy.decide(chat("x"), commit=False).pool == "s"  # still request #1
    assert [policy.decide(chat("x")).pool for _ in range(4)] == ["s", "l", "s", "l"]


def test_the_gateway_path_decides_as_decide_does():
    # The gateway hands the policy the body (decide_request); the fixed share reads none of it.
    body = {"model": "switchyard", "messages": [{"role": "user", "content": "prove it " * 200}]}
    shares = FixedSharePolicy("s", "l", Fraction(1, 3)), FixedSharePolicy("s", "l", Fraction(1, 3))
    via_body = [shares[0].decide_request(body, "chat") for _ in range(6)]
    assert via_body == [shares[1].decide(chat("x")) for _ in range(6)]
    assert [d.pool for d in via_body] == ["s", "s", "l"] * 2 and via_body[2].reason == "request #3, large share 1/3"
    rules = RulesPolicy(RulesPolicyConfig(kind="rules", small="s", large="l"))
    assert rules.decide_request(body, "chat") == rules.decide(features.extract(body, "chat"))
    # The long prompt counts: the body was read.
    assert rules.decide_request(body, "chat").score != rules.decide(chat("x")).score


# -- cascade ------------------------------------------------------------------------------------


def cascade(**overrides) -> CascadePolicy:
    return CascadePolicy(CascadePolicyConfig(kind="cascade", small="s", large="l", **overrides))


REQUEST = {"messages": [{"role": "user", "content": "weather?"}], "tools": [WEATHER_TOOL]}


def test_cascade_decides_small_first_with_escalation():
    decision = cascade().decide(chat("x"))
    assert (decision.pool, decision.escalate_to) == ("s", "l")


@pytest.mark.parametrize(
    ("answer", "request_extra", "problem"),
    [
        (Answer("It is sunny."), {}, None),
        (Answer("", [ToolCall("get_weather", '{"city": "Paris", "unit": "c"}')]), {}, None),
        (Answer("", [ToolCall("get_weather", '{"city": "Paris", "unit": "kelvin"}')]), {}, "fail the schema"),
        (Answer("", [ToolCall("get_weather", '{"unit": "c"}')]), {}, "'city' is a required property"),
        (Answer("", [ToolCall("get_weather", '{"city": "Par')]), {}, "not JSON"),
        (Answer("", [ToolCall("get_time", "{}")]), {}, "not offered"),
        (Answer("   "), {}, "empty answer"),
        (Answer("I'm sorry, but I can't help with that."), {}, "refusal"),
        (Answer("As an AI, I cannot browse."), {}, "refusal"),
        (Answer("Sunny."), {"tool_choice": "required"}, "demanded a tool call"),
        (Answer("Sunny.", finish_reason="length"), {}, None),
    ],
)
def test_cascade_validation(answer, request_extra, problem):
    problems = cascade().failures(answer, {**REQUEST, **request_extra})
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problem in problems[0], problems


def test_cascade_optional_checks():
    truncated = Answer("Sunny and", finish_reason="length")
    assert cascade(escalate_on_truncation=True).failures(truncated, REQUEST) == ["cut short by max_tokens"]
    assert cascade(refusal_patterns=[r"sunny"]).failures(Answer("Sunny."), REQUEST)[0].startswith("refusal")
    relaxed = cascade(require_demanded_tool_call=False)
    assert relaxed.failures(Answer("Sunny."), {**REQUEST, "tool_choice": "required"}) == []


def test_cascade_with_a_threshold_sends_high_scoring_requests_straight_to_large():
    policy = cascade(threshold=1.0)
    hard = policy.decide(chat("Prove it step by step", reasoning_effort="high"))
    assert hard.pool == "l" and hard.escalate_to is None  # no small answer to wait for
    assert hard.reason.startswith("straight to l: score 2.25 >= 1") and hard.score == pytest.approx(2.25, abs=0.005)  # and the prompt's thousandths
    easy = policy.decide(chat("What is the capital of France?"))
    assert easy.pool == "s" and easy.escalate_to == "l"
    # Without a threshold nothing skips the small pool, however hard it scores.
    assert cascade().decide(chat("Prove it step by step", reasoning_effort="high")).pool == "s"
