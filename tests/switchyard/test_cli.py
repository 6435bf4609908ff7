"""``sparksync switchyard explain`` and ``serve``, through click's runner and as a real process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import httpx
from click.testing import CliRunner

from sparksync.cli.main import cli
from tests.engines.engine_procs import free_port

CONFIG = """
[pools.mini]
urls = ["http://127.0.0.1:9"]
[pools.big]
urls = ["http://127.0.0.1:9"]
[policy]
kind = "rules"
small = "mini"
large = "big"
threshold = 1.0
"""


def write(tmp_path, name: str, content) -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def test_explain_shows_the_pool_the_score_and_its_reasons(tmp_path):
    config = write(tmp_path, "sy.toml", CONFIG)
    request = write(
        tmp_path,
        "req.json",
        {
            "model": "switchyard",
            "reasoning_effort": "high",
            "messages": [{"role": "user", "content": "Prove it step by step"}],
        },
    )
    result = CliRunner().invoke(cli, ["switchyard", "explain", request, "--config", config])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("-> pool 'big' (rules: score 2.25 >= 1:")
    assert (
        "+1.00  reasoning requested (level 1)" in result.stdout and "+0.75  keyword 'prove'" in result.stdout
    )
    assert "+0.00" not in result.stdout and "prompt of" not in result.stdout  # no zero terms
    assert "   tools offered     0" in lines


def test_explain_json_and_forced_pool(tmp_path):
    config = write(tmp_path, "sy.toml", CONFIG)
    request = write(
        tmp_path, "req.json", {"model": "switchyard", "messages": [{"role": "user", "content": "hi"}]}
    )
    result = CliRunner().invoke(cli, ["switchyard", "explain", request, "--config", config, "--json"])
    document = json.loads(result.stdout)
    assert document["pool"] == "mini" and document["decision"]["score"] < 1
    assert document["features"]["prompt_tokens"] == 1
    forced = CliRunner().invoke(
        cli, ["switchyard", "explain", request, "--config", config, "--pool", "big", "--json"]
    )
    assert json.loads(forced.stdout)["decision"]["policy"] == "forced"


def test_explain_refuses_what_the_gateway_would_refuse(tmp_path):
    config = write(tmp_path, "sy.toml", CONFIG)
    request = write(tmp_path, "req.json", {"model": "gpt-7", "messages": [{"role": "user", "content": "hi"}]})
    result = CliRunner().invoke(cli, ["switchyard", "explain", request, "--config", config])
    assert result.exit_code == 20 and "would refuse model 'gpt-7'" in result.stderr
    not_a_request = write(tmp_path, "bad.json", {"model": "switchyard"})
    result = CliRunner().invoke(cli, ["switchyard", "explain", not_a_request, "--config", config])
    assert result.exit_code == 20 and "neither 'messages'" in result.stderr


def test_missing_default_config_says_where_it_looked(tmp_path):
    request = write(
        tmp_path, "req.json", {"model": "switchyard", "messages": [{"role": "user", "content": "x"}]}
    )
    result = CliRunner().invoke(cli, ["switchyard", "explain", request])
    assert result.exit_code == 21 and "switchyard.toml" in result.stderr and "--config" in result.stderr


def test_serve_refuses_an_open_bind_without_a_key(tmp_path):
    config = write(tmp_path, "sy.toml", CONFIG + '\n[listen]\nhost = "192.0.2.1"\n')
    result = CliRunner().invoke(cli, ["switchyard", "serve", "--config", config])
    assert result.exit_code == 22 and "without an API key" in result.stderr


def test_serve_runs_until_interrupted(tmp_path):
    port = free_port()
    config = write(tmp_path, "sy.toml", CONFIG + f"\n[listen]\nport = {port}\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparksync", "switchyard", "serve", "--config", config],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline, models = time.monotonic() + 20, None
        while models is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1).json()
            except httpx.TransportError:
                time.sleep(0.1)
        assert models is not None, proc.stderr.read() if proc.poll() is not None else "no answer"
        assert [m["id"] for m in models["data"]] == ["switchyard", "mini", "big"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0
        assert f"serving on http://127.0.0.1:{port}/v1" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_serve_runs_on_uvloop_where_installed(monkeypatch):
    # The standard selector loop costs the gateway about a fifth more CPU per streamed token.
    import asyncio

    import uvloop

    from sparksync.switchyard import gateway

    seen = []

    async def fake_serve(config, source=None, on_listening=None):
        seen.append(type(asyncio.get_running_loop()))

    monkeypatch.setattr(gateway, "serve", fake_serve)
    gateway.run(object())
    assert seen == [uvloop.Loop]
