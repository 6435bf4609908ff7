"""The cascade through the gateway: the small answer is validated before a byte leaves, else large answers."""

from __future__ import annotations

import json

import httpx
import pytest

from sparksync.switchyard.answer import StreamAssembler
from tests.switchyard.conftest import config_for, dead_url
from tests.switchyard.fakes import Reply, call

CHAT = "/v1/chat/completions"
WEATHER = {
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
GOOD_CALL = Reply(
    content=None, tool_calls=[call("get_weather", {"city": "Porto"})], finish_reason="tool_calls"
)
SCRIPT = {
    "good call": GOOD_CALL,
    "bad arguments": Reply(
        content=None, tool_calls=[call("get_weather", {"city": "Porto", "unit": "kelvin"})]
    ),
    "broken json": Reply(content=None, tool_calls=[call("get_weather", '{"city": "Por')]),
    "empty": Reply(content=""),
    "refusal": Reply(content="I'm sorry, I cannot help with that."),
    "chat": Reply(content="Plain words are fine."),
    "midstream": Reply(content="abcdefghijklmnop", fail="midstream"),
    "server error": Reply(status=500),
}
CASCADE = {"kind": "cascade"}


def ask(text: str, stream: bool = False) -> dict:
    return {
        "model": "switchyard",
        "messages": [{"role": "user", "content": text}],
        "tools": [WEATHER],
        "stream": stream,
    }


@pytest.fixture
def cascade(fake, gateway):
    small = fake("small", SCRIPT)
    large = fake("large", default=Reply(content="the large answer"))
    return small, large, gateway(config_for([small.url], [large.url], policy=CASCADE))


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("text", ["good call", "chat"])
def test_a_valid_small_answer_is_kept_byte_for_byte(cascade, text, stream):
    small, large, gw = cascade
    direct = httpx.post(small.url + CHAT, json={**ask(text, stream), "model": "small-model"})
    small.bodies.clear()
    through = httpx.post(gw.url + CHAT, json=ask(text, stream))
    assert through.status_code == 200 and through.content == direct.content
    assert through.headers["x-switchyard-pool"] == "small" and len(small.bodies) == 1 and not large.bodies


def answer_text(response: httpx.Response) -> str:
    """The text of an answer, streamed or not."""
    if not response.headers["content-type"].startswith("text/event-stream"):
        return response.json()["choices"][0]["message"]["content"] or ""
    assembler = StreamAssembler()
    for line in response.text.splitlines():
        if line.startswith("data: {"):
            assembler.feed(json.loads(line[6:]))
    return assembler.finish().content


@pytest.mark.parametrize(
    ("text", "stream"),
    [
        ("bad arguments", False),
        ("bad arguments", True),
        ("broken json", False),
        ("broken json", True),
        ("empty", False),
        ("empty", True),
        ("refusal", False),
        ("refusal", True),
        ("midstream", True),
    ],
)
def test_a_failing_small_answer_escalates_to_large(cascade, text, stream):
    small, large, gw = cascade
    response = httpx.post(gw.url + CHAT, json=ask(text, stream))
    assert response.status_code == 200
    assert (
        response.headers["x-switchyard-pool"] == "large"
        and response.headers["x-switchyard-via"] == "escalation"
    )
    assert answer_text(response) == "the large answer"  # nothing of the failed small answer leaked
    assert len(small.bodies) == 1 and len(large.bodies) == 1 and large.bodies[0]["model"] == "large-model"
    metrics = httpx.get(gw.url + "/metrics").text
    assert 'switchyard_requests_total{outcome="ok",pool="large"} 1.0' in metrics
    if text != "midstream":  # a broken stream is a replica failure, not a failed validation
        assert 'switchyard_escalations_total{from_pool="small",to_pool="large"} 1.0' in metrics


@pytest.mark.parametrize("stream", [False, True])
def test_a_small_pool_answering_errors_escalates(cascade, stream):
    small, _, gw = cascade
    response = httpx.post(gw.url + CHAT, json=ask("server error", stream))
    assert response.headers["x-switchyard-pool"] == "large" and answer_text(response) == "the large answer"
    # The small engine's error is its answer (never sent to the small pool again): the large pool takes over.
    assert len(small.bodies) == 1


def test_demanded_tool_call_missing_escalates(cascade):
    _, large, gw = cascade
    response = httpx.post(gw.url + CHAT, json={**ask("chat"), "tool_choice": "required"})
    assert response.headers["x-switchyard-pool"] == "large" and large.bodies


def test_small_pool_down_goes_straight_to_large(fake, gateway):
    large = fake("large")
    gw = gateway(config_for([dead_url()], [large.url], policy=CASCADE))
    response = httpx.post(gw.url + CHAT, json=ask("good call"))
    assert response.status_code == 200 and response.headers["x-switchyard-pool"] == "large"
