"""The agent's API, fuzzed from its own /openapi.json with schemathesis (bounded and seeded).

A real agent on loopback; schemathesis (its command, as a user would run it)
generates requests from the published schema, with the token, and fails on
any 5xx, any answer the schema does not declare or describe (status, body,
headers, content type), schema-valid input that is refused, a 405 without
``Allow``, or a request that hangs (``--request-timeout``).

What is left out, and why:

- the two server-sent-event streams never end by design, so no whole answer
  can be checked; their errors are tested in test_api_real.py;
- starting a workload (``POST /v1/workloads``) with generated input would run
  generated command lines: it is fuzzed with invalid input only, which must
  be refused with a declared 4xx. The agent runs with an empty PATH as well,
  so not even a generated program name could be found.

Without the token, every path and method of the schema answers 401.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.agent.agentproc import RunningAgent, start_agent

SEED = 18
MAX_EXAMPLES = 25
REQUEST_TIMEOUT_S = 10  # well above any answer's time on a loaded machine; a hang is far longer
START_RANK = "start_rank_v1_workloads_post"
STREAMS = r"/stream$"


@pytest.fixture
def fuzzed_agent(tmp_path, monkeypatch) -> RunningAgent:
    if shutil.which("schemathesis", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("schemathesis is not installed (pip install -e '.[test]')")
    empty = tmp_path / "no-programs"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    agent = start_agent(tmp_path / "state", tmp_path / "agent.log", "--sample-hz", "10", "--no-advertise")
    yield agent
    agent.stop()


def _schemathesis(agent: RunningAgent, tmp_path: Path, *selection: str) -> subprocess.CompletedProcess:
    argv = [
        str(Path(sys.executable).parent / "schemathesis"), "run", f"{agent.base_url}/openapi.json",
        "--header", f"Authorization: Bearer {agent.token}",
        "--checks", "all", "--max-examples", str(MAX_EXAMPLES), "--seed", str(SEED), "--no-shrink",
        "--request-timeout", str(REQUEST_TIMEOUT_S), "--workers", "1",
        "--phases", "examples,coverage,fuzzing", "--exclude-path-regex", STREAMS, *selection,
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEMATHESIS_")}
    env["PATH"] = os.defpath
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)


def test_every_operation_holds_to_its_schema(fuzzed_agent, tmp_path):
    done = _schemathesis(fuzzed_agent, tmp_path, "--exclude-operation-id", START_RANK)
    summary = done.stdout[-6000:]
    assert done.returncode == 0, summary
    assert re.search(r"Tested:\s+2\d", done.stdout), summary  # the 27 operations ran, not a vacuous pass
    assert fuzzed_agent.proc.poll() is None, fuzzed_agent.log()


def test_starting_a_workload_refuses_every_invalid_request_with_a_declared_4xx(fuzzed_agent, tmp_path):
    done = _schemathesis(fuzzed_agent, tmp_path, "--include-operation-id", START_RANK, "--mode", "negative")
    assert done.returncode == 0, done.stdout[-6000:]
    assert "Tested: 1" in re.sub(r"\s+", " ", done.stdout), done.stdout[-3000:]
    with fuzzed_agent.client() as client:
        assert client.get("/v1/workloads").json()["workloads"] == []  # nothing was started


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "w-1", path)


def test_without_the_token_every_path_and_method_answers_401(fuzzed_agent):
    with fuzzed_agent.client() as client:
        schema = client.get("/openapi.json").json()
    operations = [(method.upper(), path) for path, item in schema["paths"].items() for method in item]
    assert len(operations) >= 14
    for token in ("", "wrong-token"):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        with httpx.Client(base_url=fuzzed_agent.base_url, headers=headers, timeout=10) as client:
            for method, path in operations + [("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/nope")]:
                response = client.request(method, _concrete(path), json={} if method == "POST" else None)
                assert response.status_code == 401, (method, path, response.text)
                assert json.loads(response.text)["error"] == "unauthorized"
