"""The OpenAI Python SDK against the gateway, as a real client would use it: streaming, tools, errors."""

from __future__ import annotations

import json

import openai
import pytest

from tests.switchyard.conftest import config_for, dead_url
from tests.switchyard.fakes import Reply, call

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather now",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
TOOL_REPLY = Reply(
    content=None, tool_calls=[call("get_weather", {"city": "Braga"})], finish_reason="tool_calls"
)


def client_for(gw) -> openai.OpenAI:
    # max_retries=0: the SDK's own retries would hide what the gateway answered.
    return openai.OpenAI(base_url=gw.url + "/v1", api_key="unused", max_retries=0, timeout=60)


@pytest.fixture
def sdk(fake, gateway):
    small = fake("small", {"weather": TOOL_REPLY, "broken": Reply(content="x" * 40, fail="midstream")})
    large = fake("large")
    gw = gateway(config_for([small.url], [large.url]))
    with client_for(gw) as client:
        yield client, small


def test_sdk_lists_models(sdk):
    client, _ = sdk
    assert [m.id for m in client.models.list()] == ["switchyard", "small", "large"]


def test_sdk_tool_call_round_trip(sdk):
    client, small = sdk
    completion = client.chat.completions.create(
        model="switchyard",
        messages=[{"role": "user", "content": "weather"}],
        tools=[WEATHER],
        tool_choice="auto",
    )
    [tool_call] = completion.choices[0].message.tool_calls
    assert tool_call.function.name == "get_weather" and json.loads(tool_call.function.arguments) == {
        "city": "Braga"
    }
    assert completion.usage.completion_tokens == 7
    assert small.bodies[0]["tools"] == [WEATHER] and small.bodies[0]["tool_choice"] == "auto"


def test_sdk_streams_tool_call_deltas_and_usage(sdk):
    client, _ = sdk
    stream = client.chat.completions.create(
        model="switchyard",
        messages=[{"role": "user", "content": "weather"}],
        tools=[WEATHER],
        stream=True,
        stream_options={"include_usage": True},
    )
    name, arguments, usage = "", "", None
    for chunk in stream:
        for choice in chunk.choices:
            for piece in choice.delta.tool_calls or []:
                name += piece.function.name or ""
                arguments += piece.function.arguments or ""
        usage = chunk.usage or usage
    assert name == "get_weather" and json.loads(arguments) == {"city": "Braga"}
    assert usage is not None and usage.completion_tokens == 7


def test_sdk_sees_clear_errors(sdk):
    client, _ = sdk
    with pytest.raises(openai.NotFoundError) as not_found:
        client.chat.completions.create(model="gpt-7", messages=[{"role": "user", "content": "hi"}])
    assert "the models are switchyard, small, large" in not_found.value.message
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="switchyard", messages=[])


def test_sdk_raises_on_a_stream_that_broke(sdk):
    client, _ = sdk
    stream = client.chat.completions.create(
        model="switchyard", messages=[{"role": "user", "content": "broken"}], stream=True
    )
    with pytest.raises(openai.APIError, match="failed mid-answer"):
        for _ in stream:
            pass


def test_sdk_sees_a_503_naming_the_pool(gateway):
    gw = gateway(config_for([dead_url()], [dead_url()]))
    with client_for(gw) as client, pytest.raises(openai.InternalServerError) as down:
        client.chat.completions.create(model="small", messages=[{"role": "user", "content": "hi"}])
    assert down.value.status_code == 503 and "pool 'small'" in down.value.message


@pytest.mark.engine
def test_sdk_streams_text_from_a_real_engine(small_replicas, gateway):
    gw = gateway(config_for([s.base_url for s in small_replicas], [small_replicas[0].base_url]))
    with client_for(gw) as client:
        stream = client.chat.completions.create(
            model="switchyard",
            messages=[{"role": "user", "content": "Hello there"}],
            max_tokens=16,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text and chunks[-1].usage.completion_tokens == 16 and chunks[-1].model == "tiny-small"
