"""Through the real path: the gateway in front of tiny llama-server replicas.

Two small replicas and one large (measurably slower) replica. The models are
random, so the answers are gibberish: these tests check where requests go,
that streams flow, and what happens when replicas die or clients leave.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass

import httpx
import pytest

from sparksync.switchyard.wire import WireClient
from tests.engines.engine_procs import read_metric
from tests.switchyard.conftest import config_for
from tests.switchyard.llama import replicas

pytestmark = [pytest.mark.engine]

CHAT = "/v1/chat/completions"
PREDICTED = "llamacpp:tokens_predicted_total"


def ask(text: str = "Say something about Sparks.", max_tokens: int = 8, **extra) -> dict:
    # ignore_eos: a random model may end at any step, and the tests need known lengths.
    return {
        "model": "switchyard",
        "messages": [{"role": "user", "content": text}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        **extra,
    }


def predicted(server) -> float:
    return read_metric(server.base_url, PREDICTED)


def wait_predicted(server, target: float, timeout: float = 5.0) -> float:
    """llama-server updates its counters as a slot is released, just after the answer."""
    deadline = time.monotonic() + timeout
    value = predicted(server)
    while value < target and time.monotonic() < deadline:
        time.sleep(0.05)
        value = predicted(server)
    return value


@pytest.fixture
def routed(small_replicas, large_replica, gateway):
    """A gateway factory over the shared replicas: pass the policy section."""

    def make(policy: dict, **sections):
        return gateway(
            config_for([s.base_url for s in small_replicas], [large_replica.base_url], policy, **sections)
        )

    return make


def test_fixed_share_sends_exactly_half_to_the_large_replica(routed, small_replicas, large_replica):
    gw = routed({"kind": "fixed_share", "large_share": "1/2"})
    before = [predicted(s) for s in (*small_replicas, large_replica)]
    pools = [httpx.post(gw.url + CHAT, json=ask(), timeout=60).headers["x-switchyard-pool"] for _ in range(8)]
    assert pools == ["small", "large"] * 4
    # The engines themselves confirm it: 4 answers of 8 tokens each on the large one, 2 on each small one.
    assert wait_predicted(large_replica, before[2] + 32) == before[2] + 32
    for server, start in zip(small_replicas, before):
        assert wait_predicted(server, start + 16) == start + 16


def test_rules_send_easy_requests_small_and_hard_ones_large(routed, large_replica):
    gw = routed({"kind": "rules", "threshold": 1.0})
    start = predicted(large_replica)
    easy = httpx.post(gw.url + CHAT, json=ask("What time is it?"), timeout=60)
    hard = httpx.post(
        gw.url + CHAT, json=ask("Prove that the cluster converges", reasoning_effort="high"), timeout=60
    )
    assert easy.status_code == hard.status_code == 200
    assert easy.headers["x-switchyard-pool"] == "small" and easy.json()["model"] == "tiny-small"
    assert hard.headers["x-switchyard-pool"] == "large" and hard.json()["model"] == "tiny-large"
    assert "reasoning requested" in hard.headers["x-switchyard-reason"]
    assert wait_predicted(large_replica, start + 8) == start + 8


def test_cascade_escalates_what_the_small_model_cannot_do(routed, large_replica):
    gw = routed({"kind": "cascade"})
    start = predicted(large_replica)
    plain = httpx.post(gw.url + CHAT, json=ask(), timeout=60)
    assert plain.headers["x-switchyard-pool"] == "small"
    # A random model never emits a tool call, so a demanded one is missing and the request escalates.
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
    demanded = httpx.post(gw.url + CHAT, json=ask(tools=[tool], tool_choice="required"), timeout=60)
    assert demanded.status_code == 200
    assert (
        demanded.headers["x-switchyard-pool"] == "large"
        and demanded.headers["x-switchyard-via"] == "escalation"
    )
    assert wait_predicted(large_replica, start + 8) == start + 8
    assert (
        'switchyard_escalations_total{from_pool="small",to_pool="large"} 1.0'
        in httpx.get(gw.url + "/metrics").text
    )


def test_streaming_through_the_gateway(routed):
    gw = routed({"kind": "fixed_share", "large_share": 0})
    body = ask(max_tokens=24, stream=True, stream_options={"include_usage": True})
    with httpx.stream("POST", gw.url + CHAT, json=body, timeout=60) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith(
            "text/event-stream"
        )
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    deltas = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
    assert len([d for d in deltas if d]) > 1 and lines[-1] == "data: [DONE]"
    assert chunks[-1]["usage"]["completion_tokens"] == 24  # stream_options reached the engine and came back
    metrics = httpx.get(gw.url + "/metrics").text
    assert 'switchyard_ttft_seconds_count{pool="small"} 1.0' in metrics
    assert 'switchyard_output_tokens_total{pool="small"} 24.0' in metrics


def test_client_leaving_mid_stream_frees_the_engine_slot(routed, large_replica):
    gw = routed({"kind": "fixed_share", "large_share": 1})
    start = predicted(large_replica)
    with httpx.stream("POST", gw.url + CHAT, json=ask(max_tokens=1500, stream=True), timeout=60) as response:
        contents = 0
        for line in response.iter_lines():
            contents += '"content":"' in line
            if contents >= 3:
                break
    # The gateway closes its upstream request; llama-server notices and stops generating.
    deadline = time.monotonic() + 5
    slots = httpx.get(large_replica.base_url + "/slots").json()
    while any(s["is_processing"] for s in slots) and time.monotonic() < deadline:
        time.sleep(0.05)
        slots = httpx.get(large_replica.base_url + "/slots").json()
    assert not any(s["is_processing"] for s in slots), slots
    assert predicted(large_replica) - start < 500  # far from the 1,500 asked for


@dataclass
class Outcome:
    first_byte_at: float | None = None
    completion_tokens: int | None = None
    error: str | None = None


async def _stream_one(client: httpx.AsyncClient, url: str, max_tokens: int, outcome: Outcome) -> None:
    body = ask(max_tokens=max_tokens, stream=True, stream_options={"include_usage": True})
    try:
        async with client.stream("POST", url + CHAT, json=body) as response:
            async for line in response.aiter_lines():
                outcome.first_byte_at = outcome.first_byte_at or time.monotonic()
                if line.startswith("data: {"):
                    chunk = json.loads(line[6:])
                    outcome.error = (chunk.get("error") or {}).get("message", outcome.error)
                    usage = chunk.get("usage") or {}
                    outcome.completion_tokens = usage.get("completion_tokens", outcome.completion_tokens)
            if response.status_code != 200:
                outcome.error = f"HTTP {response.status_code}"
    except httpx.HTTPError as exc:
        outcome.error = repr(exc)


async def _batch_with_a_kill(url: str, victim, n: int, max_tokens: int) -> tuple[list[Outcome], float]:
    """Start ``n`` streams, kill ``victim`` once two have begun, and wait for all of them."""
    outcomes = [Outcome() for _ in range(n)]
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=n)) as client:
        tasks = [asyncio.create_task(_stream_one(client, url, max_tokens, o)) for o in outcomes]
        deadline = time.monotonic() + 30
        while sum(o.first_byte_at is not None for o in outcomes) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        victim.proc.kill()  # SIGKILL: no goodbye to the connections it holds
        killed_at = time.monotonic()
        await asyncio.gather(*tasks)
    return outcomes, killed_at


def test_a_non_streamed_generation_longer_than_the_stream_idle_timeout_runs_once(
    routed, large_replica
):
    """llama-server sends a non-streamed answer only when all of it is generated: it must not be cut
    by the idle timeout meant for streams, nor sent again, nor count against the replica."""
    gw = routed({"kind": "fixed_share", "large_share": 1}, limits={"read_timeout_s": 0.1})
    before = predicted(large_replica)
    started = time.monotonic()
    answer = httpx.post(gw.url + CHAT, json=ask(max_tokens=160), timeout=120)
    took = time.monotonic() - started
    assert answer.status_code == 200, answer.text
    assert answer.json()["usage"]["completion_tokens"] == 160
    assert took > 0.1, f"the answer took {took:.2f} s: too fast to prove anything"
    assert wait_predicted(large_replica, before + 160) == before + 160  # generated once, not again
    assert answer.headers["x-switchyard-replica"] == large_replica.base_url
    replica = gw.gateway.pools["large"].replicas[0]
    assert replica.breaker.state.value == "closed" and replica.available


def test_killing_a_replica_loses_no_request_that_had_not_started(
    llama_binaries, tiny_model, tmp_path, gateway
):
    with replicas(llama_binaries, tiny_model, tmp_path, 2) as (victim, survivor):
        gw = gateway(
            config_for([victim.base_url, survivor.base_url], [survivor.base_url], health={"interval_s": 0.2})
        )
        # 16 streams on 2 replicas x 2 slots: 4 run, 12 wait inside the engines when the victim dies.
        outcomes, killed_at = asyncio.run(_batch_with_a_kill(gw.url, victim, n=16, max_tokens=192))
    # The victim was generating for at most its 2 slots when it died: only those answers may break, and
    # they had started streaming (the client got their first bytes and then an error event). Every
    # other request, including those waiting inside the victim, completes.
    broken = [o for o in outcomes if o.completion_tokens != 192]
    assert len(broken) <= 2, broken
    for outcome in broken:
        assert outcome.first_byte_at is not None, outcome
        assert outcome.error and "failed mid-answer" in outcome.error, outcome
    assert all(o.error is None for o in outcomes if o.completion_tokens == 192)
    late = [o for o in outcomes if o.first_byte_at is not None and o.first_byte_at > killed_at + 0.1]
    assert late, "no request was still waiting when the replica died; the test proved nothing"
    # Requests that waited inside the dead engine were retried on the survivor.
    metrics = httpx.get(gw.url + "/metrics").text
    retried = re.search(r'^switchyard_retries_total\{pool="small"\} (\S+)$', metrics, re.MULTILINE)
    assert retried and float(retried.group(1)) >= 1


def test_llama_server_closing_after_each_stream_gets_a_spare_connection_ready(small_replicas, monkeypatch):
    """llama-server drops the connection after every streamed answer; the client learns it once,
    then each request goes out on a connection opened while the previous answer streamed."""
    used_spare = []
    exchange = WireClient._exchange

    async def noted(self, conn, request, *timeouts):
        used_spare.append(conn.spare)
        return await exchange(self, conn, request, *timeouts)

    monkeypatch.setattr(WireClient, "_exchange", noted)
    body = json.dumps({**ask(max_tokens=8), "model": "any", "stream": True}).encode()

    async def four_answers() -> list[int]:
        client = WireClient(connect_timeout=5, read_timeout=30)
        statuses = []
        try:
            for _ in range(4):
                response = await client.post(
                    small_replicas[0].base_url + CHAT, body, {"Content-Type": "application/json"}
                )
                await response.read()
                await response.aclose()
                statuses.append(response.status_code)
                await asyncio.sleep(0.05)  # the replica's close arrives, as between real requests
        finally:
            await client.aclose()
        return statuses

    assert asyncio.run(four_answers()) == [200] * 4
    # 1st: a new connection, which the replica closes; the 2nd finds it closed, learns, and opens a
    # new one and a spare; the 3rd and 4th each go out on the spare opened during the answer before.
    assert used_spare == [False, False, True, True], used_spare


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_bfcl_eval_runs_through_the_gateway_on_real_engines(small_replicas, large_replica, tmp_path, stream):
    """The real path of `switchyard eval --suite bfcl`: the suite's cases from the installed package, the
    gateway, real llama-server pools. Random tiny models never call a tool, so the score is 0 and the
    eval must say there is no score rather than claim parity."""
    from click.testing import CliRunner

    from sparksync.cli.main import cli
    from sparksync.switchyard.eval.report import NO_SCORE

    config = tmp_path / "switchyard.json"
    config.write_text(json.dumps({
        "pools": {"small": {"urls": [s.base_url for s in small_replicas], "model": "tiny-small"},
                  "large": {"urls": [large_replica.base_url], "model": "tiny-large"}},
        "policy": {"kind": "fixed_share", "small": "small", "large": "large", "large_share": "1/2"},
    }))  # fmt: skip
    out = tmp_path / "report.json"
    result = CliRunner().invoke(cli, [
        "switchyard", "eval", "--suite", "bfcl", "--limit", "6", "--config", str(config), "--concurrency", "3",
        "--max-tokens", "12", "--out", str(out), *(["--stream"] if stream else []),
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    for target in report["targets"]:
        assert target["errors"] == 0, target["outcomes"]
        assert all(o["output_tokens"] > 0 for o in target["outcomes"]), target["outcomes"]
        assert target["categories"] == {"simple": 0.0, "multiple": 0.0, "parallel": 0.0}
    assert report["targets"][0]["share"] == {"large": 0.5, "small": 0.5}
    assert report["gain"]["parity"] is None and report["gain"]["summary"].startswith(NO_SCORE)
    if stream:
        assert all(t["ttft_p50_ms"] > 0 for t in report["targets"])


def test_a_sweep_runs_end_to_end_on_real_engines(small_replicas, large_replica):
    """`switchyard eval --sweep` on the real path: the BFCL cases, the gateway, real llama-server pools,
    streamed, with a throughput load at each point. The tiny models score 0, so there is no score, and the
    sweep says so; the large pool is ten times slower, so sending less to it raises the throughput."""
    from sparksync.switchyard.eval.report import NO_SCORE
    from sparksync.switchyard.eval.suites import load_suite
    from sparksync.switchyard.eval.sweep import SweepSettings, SweepSpec, run_sweep

    config = config_for([s.base_url for s in small_replicas], [large_replica.base_url],
                        {"kind": "fixed_share", "large_share": 1})  # fmt: skip
    config.pools["small"].model, config.pools["large"].model = "tiny-small", "tiny-large"
    settings = SweepSettings(concurrency=4, max_tokens=24, load_s=3, settle_s=0.5)
    report = run_sweep(config, load_suite("bfcl", limit=6), SweepSpec.parse("large_share=1,1/4"), settings)
    anchor, quarter = report.points
    assert anchor.anchor and anchor.large_share == 1 and 0.1 <= quarter.large_share <= 0.4
    for point in report.points:
        assert point.score == 0 and point.score_errors == 0 and point.load_errors == 0, point
        assert point.requests > 0 and point.output_tokens_per_s > 0 and point.ttft_p50_ms > 0
    assert quarter.throughput_x > 1.5, report.points
    assert report.summary().startswith(NO_SCORE)
