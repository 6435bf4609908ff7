"""The gateway over HTTP before scripted fake replicas: API shape, bad input, pass-through, resilience."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from tests.switchyard.conftest import config_for, dead_url
from tests.switchyard.fakes import Reply, call

CHAT = "/v1/chat/completions"


def ask(text: str = "hello", model: str = "switchyard", **extra) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


def sse_lines(response: httpx.Response) -> list[str]:
    return [line for line in response.text.splitlines() if line.startswith("data: ")]


@pytest.fixture
def pair(fake, gateway):
    """A small and a large fake replica behind a gateway that sends everything to small."""
    small, large = fake("small"), fake("large")
    gw = gateway(config_for([small.url], [large.url]))
    return small, large, gw


# -- the API ------------------------------------------------------------------------------------


def test_models_lists_the_virtual_model_and_the_pools(pair):
    _, _, gw = pair
    listing = httpx.get(gw.url + "/v1/models").json()
    assert listing["object"] == "list"
    assert [m["id"] for m in listing["data"]] == ["switchyard", "small", "large"]


def test_chat_is_relayed_with_only_the_model_renamed(pair):
    small, _, gw = pair
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    body = ask(
        tools=tools,
        tool_choice="auto",
        stream_options={"include_usage": True},
        temperature=0.3,
        logit_bias={"42": -100},
        max_tokens=9,
    )
    response = httpx.post(gw.url + CHAT, json=body)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "answer from small"
    assert (
        response.headers["x-switchyard-pool"] == "small" and response.headers["x-switchyard-via"] == "policy"
    )
    assert response.headers["x-switchyard-replica"] == small.url  # which replica of the pool answered
    assert small.bodies == [{**body, "model": "small-model"}]


def test_tool_calls_and_usage_come_back_unchanged(fake, gateway):
    reply = Reply(
        content=None,
        tool_calls=[call("get_weather", {"city": "Lisboa", "unit": "c"})],
        finish_reason="tool_calls",
    )
    small = fake("small", default=reply)
    gw = gateway(config_for([small.url], [dead_url()]))
    body = ask(stream_options={"include_usage": True})
    direct = httpx.post(small.url + CHAT, json={**body, "model": "small-model"})
    through = httpx.post(gw.url + CHAT, json=body)
    assert through.content == direct.content
    assert (
        through.json()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
        == '{"city": "Lisboa", "unit": "c"}'
    )
    # Streams too, byte for byte: tool-call deltas, the usage chunk, [DONE].
    direct = httpx.post(small.url + CHAT, json={**body, "model": "small-model", "stream": True})
    through = httpx.post(gw.url + CHAT, json={**body, "stream": True})
    assert through.status_code == 200 and through.headers["content-type"].startswith("text/event-stream")
    assert through.content == direct.content
    assert '"usage"' in sse_lines(through)[-2] and sse_lines(through)[-1] == "data: [DONE]"


def test_completions_endpoint(pair):
    small, _, gw = pair
    response = httpx.post(
        gw.url + "/v1/completions", json={"model": "switchyard", "prompt": "Once", "max_tokens": 3}
    )
    assert response.status_code == 200 and small.bodies[-1]["prompt"] == "Once"


def test_a_pool_name_or_the_header_forces_the_pool(pair):
    small, large, gw = pair
    by_model = httpx.post(gw.url + CHAT, json=ask(model="large"))
    assert (
        by_model.headers["x-switchyard-pool"] == "large" and by_model.headers["x-switchyard-via"] == "model"
    )
    by_header = httpx.post(gw.url + CHAT, json=ask(), headers={"X-Switchyard-Pool": "large"})
    assert (
        by_header.headers["x-switchyard-pool"] == "large"
        and by_header.headers["x-switchyard-via"] == "header"
    )
    assert len(large.bodies) == 2 and not small.bodies
    wrong = httpx.post(gw.url + CHAT, json=ask(), headers={"X-Switchyard-Pool": "medium"})
    assert wrong.status_code == 400 and "the pools are small, large" in wrong.json()["error"]["message"]


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "status", "code"),
    [
        (b"{not json", 400, "invalid_json"),
        (b"[1, 2]", 400, "invalid_json"),
        (b'{"messages": [{"role": "user", "content": "x"}]}', 400, "missing_model"),
        (b'{"model": "switchyard", "messages": []}', 400, "invalid_messages"),
    ],
)
def test_malformed_requests_get_openai_style_errors(pair, content, status, code):
    _, _, gw = pair
    response = httpx.post(gw.url + CHAT, content=content, headers={"content-type": "application/json"})
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code and error["type"] == "invalid_request_error" and error["message"]


def test_unknown_model_is_404_naming_the_known_ones(pair):
    _, _, gw = pair
    response = httpx.post(gw.url + CHAT, json=ask(model="gpt-7"))
    assert response.status_code == 404
    message = response.json()["error"]["message"]
    assert "'gpt-7'" in message and "switchyard, small, large" in message


def test_oversized_body_is_413(fake, gateway):
    small = fake("small")
    gw = gateway(config_for([small.url], [small.url], limits={"max_body_bytes": 2048}))
    response = httpx.post(gw.url + CHAT, json=ask("x" * 5000))
    assert response.status_code == 413 and "max_body_bytes" in response.json()["error"]["message"]
    # Without a Content-Length (chunked), the limit still holds while reading.
    chunks = iter([json.dumps(ask("y" * 5000)).encode()])
    response = httpx.post(gw.url + CHAT, content=chunks)
    assert response.status_code == 413
    assert not small.bodies


def test_unknown_path_and_method(pair):
    _, _, gw = pair
    assert httpx.get(gw.url + "/v1/embeddings").json()["error"]["code"] == "not_found"
    wrong_method = httpx.get(gw.url + CHAT)
    assert wrong_method.status_code == 405
    assert wrong_method.json()["error"]["type"] == "invalid_request_error"  # the client's mistake


def test_api_key_is_demanded_when_configured(fake, gateway, monkeypatch):
    monkeypatch.setenv("SY_GATEWAY_KEY", "k-987")
    small = fake("small")
    gw = gateway(config_for([small.url], [small.url], listen={"api_key_env": "SY_GATEWAY_KEY"}))
    assert httpx.post(gw.url + CHAT, json=ask()).status_code == 401
    assert httpx.post(gw.url + CHAT, json=ask(), headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.get(gw.url + "/metrics").status_code == 401
    ok = httpx.post(gw.url + CHAT, json=ask(), headers={"Authorization": "Bearer k-987"})
    assert ok.status_code == 200
    assert small.bodies and all("authorization" not in json.dumps(b).lower() for b in small.bodies)
    assert httpx.get(gw.url + "/health").status_code == 200  # liveness stays open


# -- resilience ---------------------------------------------------------------------------------


def test_dead_replica_is_retried_elsewhere_then_benched(fake, gateway):
    small = fake("small")
    dead = dead_url()
    # Health checks every 60 s: only the breaker can take the dead replica out here.
    gw = gateway(config_for([dead, small.url], [small.url], health={"interval_s": 60}))
    gw.gateway.pools["small"].replicas[0].healthy = True  # as if the first check had not run yet
    for _ in range(6):
        assert httpx.post(gw.url + CHAT, json=ask()).status_code == 200
    dead_replica = gw.gateway.pools["small"].replicas[0]
    assert dead_replica.breaker.state.value == "open"
    metrics = httpx.get(gw.url + "/metrics").text
    assert 'switchyard_errors_total{kind="connect",pool="small"} 3.0' in metrics
    assert 'switchyard_requests_total{outcome="ok",pool="small"} 6.0' in metrics


def test_replica_failing_its_health_check_leaves_the_rotation(fake, gateway):
    sick, well = fake("sick"), fake("well")
    gw = gateway(config_for([sick.url, well.url], [well.url]))
    sick.healthy = False
    deadline = time.monotonic() + 5
    while gw.gateway.pools["small"].replicas[0].healthy and time.monotonic() < deadline:
        time.sleep(0.05)
    for _ in range(4):
        httpx.post(gw.url + CHAT, json=ask())
    assert not sick.bodies and len(well.bodies) == 4
    metrics = httpx.get(gw.url + "/metrics").text
    assert f'switchyard_replica_up{{pool="small",replica="{sick.url}"}} 0.0' in metrics


def test_a_replica_in_both_pools_is_probed_once_a_round_and_leaves_both(fake, gateway):
    shared, other = fake("shared"), fake("other")
    gw = gateway(config_for([shared.url, other.url], [shared.url]))  # health every 0.2 s
    time.sleep(1.0)
    # One probe per round for the URL both pools name (about 6 rounds here), not one per pool.
    assert shared.health_checks <= other.health_checks + 1
    shared.healthy = False
    small, large = gw.gateway.pools["small"].replicas[0], gw.gateway.pools["large"].replicas[0]
    deadline = time.monotonic() + 5
    while (small.healthy or large.healthy) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not small.healthy and not large.healthy  # the one probe's answer counts for both pools


@pytest.mark.parametrize("stream", [False, True])
def test_requests_no_engine_is_working_on_are_tried_elsewhere(fake, gateway, stream):
    """A refused connect, a 503 ("not now") and a connection dropped before any byte of an answer
    (the engine let go of the request) are the failures another replica may take over."""
    busy = fake("busy", default=Reply(status=503))
    dropping = fake("dropping", default=Reply(fail="drop"))
    good = fake("good", default=Reply(content="fine"))
    small = [dead_url(), busy.url, dropping.url, good.url]
    gw = gateway(config_for(small, [good.url], health={"interval_s": 60}, limits={"max_attempts": 4}))
    for replica in gw.gateway.pools["small"].replicas:
        replica.healthy = True  # as if the first health check had not run yet
    response = httpx.post(gw.url + CHAT, json=ask(stream=stream))
    assert response.status_code == 200 and "fine" in response.text.replace('"', "")
    assert len(busy.bodies) == 1 and len(dropping.bodies) == 1 and len(good.bodies) == 1
    assert response.headers["x-switchyard-replica"] == good.url
    metrics = httpx.get(gw.url + "/metrics").text
    assert 'switchyard_retries_total{pool="small"} 3.0' in metrics
    assert 'switchyard_errors_total{kind="busy",pool="small"} 1.0' in metrics
    # A busy answer is the replica saying "not now", not failing: its breaker counts nothing.
    assert gw.gateway.pools["small"].replicas[1].breaker._consecutive == 0


@pytest.mark.parametrize("stream", [False, True])
def test_a_request_an_engine_may_still_be_on_is_never_sent_again(fake, gateway, stream):
    """An engine's error answer (500) is its answer, and a stream silent past read_timeout_s may
    still be generating: the client hears what happened, and no other replica runs it again."""
    broken = fake("broken", default=Reply(status=500))
    silent = fake("silent", default=Reply(delay_s=3))
    spare = fake("spare")
    limits = {"read_timeout_s": 0.3, "answer_timeout_s": 0.3}
    gw = gateway(config_for([broken.url, spare.url], [silent.url, spare.url], limits=limits))
    gw.gateway.pools["small"].replicas[0].last_picked = -1  # the broken one is the first choice
    gw.gateway.pools["large"].replicas[0].last_picked = -1
    failed = httpx.post(gw.url + CHAT, json=ask(stream=stream))
    assert failed.status_code == 500 and failed.headers["x-switchyard-replica"] == broken.url
    assert failed.json()["error"]["message"] == "broken failed on purpose"
    timed_out = httpx.post(gw.url + CHAT, json=ask(model="large", stream=stream), timeout=30)
    assert timed_out.status_code == 504 and timed_out.headers["x-switchyard-replica"] == silent.url
    error = timed_out.json()["error"]
    assert error["code"] == "timeout" and "not sent to another replica" in error["message"]
    assert ("limits.read_timeout_s" if stream else "limits.answer_timeout_s") in error["message"]
    assert len(broken.bodies) == 1 and len(silent.bodies) == 1 and not spare.bodies
    assert "switchyard_retries_total{" not in httpx.get(gw.url + "/metrics").text


def test_when_every_replica_is_busy_the_engines_error_comes_back(fake, gateway):
    busy = fake("busy", default=Reply(status=503))
    gw = gateway(config_for([busy.url], [busy.url]))
    response = httpx.post(gw.url + CHAT, json=ask())
    assert response.status_code == 503 and "failed on purpose" in response.text
    assert len(busy.bodies) == 3  # limits.max_attempts


def test_engine_errors_come_back_in_openais_shape(fake, gateway):
    """llama.cpp puts its HTTP status in an integer ``code``; OpenAI's shape has a string or null."""
    broken = fake("broken", default=Reply(status=500))
    refusing = fake("refusing", default=Reply(status=400))
    gw = gateway(config_for([broken.url], [refusing.url]))
    direct = httpx.post(broken.url + CHAT, json=ask()).json()["error"]
    assert direct["code"] == 500 and "type" not in direct  # what the engine itself sends
    for model, status, name in (("small", 500, "broken"), ("large", 400, "refusing")):
        response = httpx.post(gw.url + CHAT, json=ask(model=model))
        assert response.status_code == status and response.headers["content-type"] == "application/json"
        assert response.json() == {
            "error": {
                "message": f"{name} failed on purpose",
                "type": "api_error" if status == 500 else "invalid_request_error",
                "param": None,
                "code": None,
            }
        }


def test_a_long_non_streamed_answer_is_not_cut_by_the_stream_idle_timeout(fake, gateway):
    """llama-server sends a non-streamed answer only once all of it is generated: a second of
    silence there is the answer being made, not a replica in trouble."""
    slow = fake("slow", default=Reply(content="done", delay_s=1.0))
    other = fake("other")
    gw = gateway(config_for([slow.url, other.url], [slow.url], limits={"read_timeout_s": 0.3}))
    gw.gateway.pools["small"].replicas[0].last_picked = -1
    response = httpx.post(gw.url + CHAT, json=ask(), timeout=30)
    assert response.status_code == 200 and response.json()["choices"][0]["message"]["content"] == "done"
    assert len(slow.bodies) == 1 and not other.bodies
    assert gw.gateway.pools["small"].replicas[0].breaker.state.value == "closed"


def test_a_non_streamed_answer_past_its_deadline_is_a_504_and_not_run_again(fake, gateway):
    slow = fake("slow", default=Reply(delay_s=3))
    other = fake("other")
    gw = gateway(config_for([slow.url, other.url], [slow.url], limits={"answer_timeout_s": 0.4}))
    gw.gateway.pools["small"].replicas[0].last_picked = -1
    started = time.monotonic()
    response = httpx.post(gw.url + CHAT, json=ask(), timeout=30)
    assert time.monotonic() - started < 2.5
    assert response.status_code == 504 and response.headers["x-switchyard-replica"] == slow.url
    error = response.json()["error"]
    assert error["code"] == "timeout" and error["type"] == "timeout_error"
    assert "limits.answer_timeout_s" in error["message"] and "not sent to another replica" in error["message"]
    assert len(slow.bodies) == 1 and not other.bodies
    # A generation longer than the deadline is not the replica failing: it stays in service.
    replica = gw.gateway.pools["small"].replicas[0]
    assert replica.breaker._consecutive == 0 and replica.available


def test_a_stream_broken_midway_is_not_retried_and_ends_with_an_error_event(fake, gateway):
    flaky = fake("flaky", default=Reply(content="abcdefghijklmnop", fail="midstream"))
    good = fake("good")
    gw = gateway(config_for([flaky.url, good.url], [good.url]))
    flaky_replica = gw.gateway.pools["small"].replicas[0]
    flaky_replica.last_picked = -1  # make the flaky one the first choice
    response = httpx.post(gw.url + CHAT, json=ask(stream=True))
    lines = sse_lines(response)
    assert '"content": "abcd"' in lines[1]
    last = json.loads(lines[-1][6:])
    assert last["error"]["code"] == "stream_broken" and "send the request again" in last["error"]["message"]
    assert len(flaky.bodies) == 1 and not good.bodies  # bytes had reached the client: no retry


def test_pool_with_no_replica_is_a_503_naming_it(fake, gateway):
    small = fake("small")
    gw = gateway(config_for([small.url], [dead_url()]))
    response = httpx.post(gw.url + CHAT, json=ask(model="large"))
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "pool_unavailable"
    assert "pool 'large'" in error["message"] and "policy.fallback" in error["message"]


def test_fallback_sends_to_the_other_pool(fake, gateway):
    small = fake("small")
    gw = gateway(
        config_for(
            [small.url], [dead_url()], policy={"kind": "fixed_share", "large_share": 1, "fallback": True}
        )
    )
    response = httpx.post(gw.url + CHAT, json=ask())
    assert response.status_code == 200
    assert (
        response.headers["x-switchyard-pool"] == "small"
        and response.headers["x-switchyard-via"] == "fallback"
    )
    assert small.bodies[0]["model"] == "small-model"


def test_fallback_that_also_fails_names_both_pools(gateway):
    gw = gateway(
        config_for(
            [dead_url()], [dead_url()], policy={"kind": "fixed_share", "large_share": 1, "fallback": True}
        )
    )
    message = httpx.post(gw.url + CHAT, json=ask()).json()["error"]["message"]
    assert "pool 'large'" in message and "fallback pool 'small'" in message


@pytest.mark.parametrize("timer", ["asyncio", "anyio"])
def test_request_timeout_is_504(fake, gateway, timer, monkeypatch):
    slow = fake("slow", default=Reply(delay_s=3))
    gw = gateway(config_for([slow.url], [slow.url], limits={"request_timeout_s": 0.3}))
    started = time.monotonic()
    # Only around the request: the servers' own shutdown (uvicorn) needs asyncio.timeout.
    with monkeypatch.context() as patch:
        if timer == "anyio":  # as on Python 3.10, which has no asyncio.timeout
            patch.delattr(asyncio, "timeout", raising=False)
        response = httpx.post(gw.url + CHAT, json=ask())
    assert response.status_code == 504 and "request_timeout_s" in response.json()["error"]["message"]
    assert time.monotonic() - started < 2


def test_client_leaving_mid_stream_cancels_the_upstream_request(fake, gateway):
    slow = fake("slow", default=Reply(content="x" * 400, token_delay_s=0.05))  # 100 chunks, ~5 s
    gw = gateway(config_for([slow.url], [slow.url]))
    with httpx.stream("POST", gw.url + CHAT, json=ask(stream=True)) as response:
        lines = response.iter_lines()
        for _ in range(3):
            next(lines)
    # The gateway notices, closes its upstream response, and frees the replica at once.
    replica = gw.gateway.pools["small"].replicas[0]
    deadline = time.monotonic() + 2
    while replica.outstanding and time.monotonic() < deadline:
        time.sleep(0.02)
    assert replica.outstanding == 0
    assert replica.breaker.state.value == "closed"  # a client leaving is not the replica's fault


def test_metrics_report_share_tokens_and_ttft(fake, gateway):
    small, large = fake("small"), fake("large")
    gw = gateway(config_for([small.url], [large.url], policy={"kind": "fixed_share", "large_share": "1/4"}))
    for _ in range(8):
        httpx.post(gw.url + CHAT, json=ask(stream=True))
    text = httpx.get(gw.url + "/metrics").text
    assert 'switchyard_share{pool="large"} 0.25' in text and 'switchyard_share{pool="small"} 0.75' in text
    assert 'switchyard_routed_total{pool="large",via="policy"} 2.0' in text
    assert 'switchyard_ttft_seconds_count{pool="small"} 6.0' in text
    # The fake streams "answer from small" in 4-character pieces: 5 output events per answer.
    assert 'switchyard_output_tokens_total{pool="small"} 30.0' in text
    assert 'switchyard_tokens_per_second{pool="small"} 3.0' in text  # 30 tokens over the 10 s window
