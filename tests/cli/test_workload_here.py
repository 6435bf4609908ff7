"""A workload on this computer from the CLI, for real: ``--nodes local``, the demo model, the cached llama-server.

No ``--set llamacpp.server_binary=``: this computer's agent has the engine
cache on its PATH, so the recipe's plain ``llama-server`` is found the way
a node finds its installed engine. An agent for this computer runs during
the test, as the desktop app's would; the commands attach to it.
"""

from __future__ import annotations

import json
import threading
import time

import psutil
import pytest
from click.testing import CliRunner

from sparksync.cli.main import cli
from sparksync.core.agents import LocalAgent
from sparksync.core.engines import write_demo_model
from sparksync.core.workloads.local_model import free_port, generate_for
from tests.engines.conftest import llama_binaries  # noqa: F401  (the cached build, or a skip)

pytestmark = [pytest.mark.engine, pytest.mark.slow]

WAIT_S = 60.0


def invoke(*args: str):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture
def here(llama_binaries):  # noqa: F811
    """This computer's agent at 10 Hz, started as the app starts it (stopped at teardown)."""
    agent = LocalAgent(sample_hz=10).start()
    yield agent
    agent.stop()


def test_a_model_started_on_this_computer_from_the_cli_shows_its_tokens_per_second(here):
    engines = json.loads(invoke("engine", "list", "local", "--json"))["nodes"]
    assert [(n["name"], n["engines"]["llama.cpp"]) for n in engines] == [("this computer", True)]
    model, port = write_demo_model(), free_port()
    started = json.loads(invoke(
        "workload", "start", "llamacpp-single", "--nodes", "local", "--model", str(model), "--http-port", str(port),
        "--set", "llamacpp.threads=1", "--set", "llamacpp.context=2048", "--json",
    ))  # fmt: skip
    workload_id = started["workload_id"]
    [rank] = started["ranks"]
    assert (started["state"], started["nodes"], rank["node"]) == ("ready", ["this computer"], "this computer")
    assert rank["status"]["argv"][0] == "llama-server"  # found on the agent's PATH, not given
    server = psutil.Process(rank["status"]["pid"])
    try:
        stop = threading.Event()
        answers = {}
        url = f"http://127.0.0.1:{port}"
        load = threading.Thread(target=lambda: answers.update(done=generate_for(url, WAIT_S, stop)))
        load.start()
        try:
            rates = wait_for_tokens(here)  # in this computer's telemetry, while it generates
            listed = json.loads(invoke("workload", "list", "--json"))["workloads"]
        finally:
            stop.set()
            load.join()
        assert max(rates) > 0
        [entry] = [w for w in listed if w["workload_id"] == workload_id]
        assert entry["state"] == "ready" and entry["decode_tps"] is not None
        assert answers["done"].tokens > 0
    finally:
        text = invoke("workload", "stop", workload_id)
    assert text.strip() == f"stopped {workload_id} on this computer"
    assert not server.is_running() or server.status() == psutil.STATUS_ZOMBIE
    assert json.loads(invoke("workload", "list", "--json")) == {"workloads": []}


def wait_for_tokens(agent: LocalAgent) -> list[float]:
    """The decode tokens/s the agent's samples carry, once one is above zero."""
    deadline, rates = time.monotonic() + WAIT_S, []
    with agent.client() as client:
        while time.monotonic() < deadline:
            latest = client.snapshot().latest
            rates = [f.decode_tps for f in (latest.workloads or []) if f.decode_tps is not None] if latest else []
            if any(r > 0 for r in rates):
                return rates
            time.sleep(0.2)
    pytest.fail(f"no tokens/s above zero in this computer's telemetry within {WAIT_S:.0f} s (last: {rates})")


def test_a_stopped_workload_keeps_its_last_tokens_per_second_until_it_is_pruned(here):
    model, port = write_demo_model(), free_port()
    started = json.loads(invoke(
        "workload", "start", "llamacpp-single", "--nodes", "local", "--model", str(model), "--http-port", str(port),
        "--set", "llamacpp.threads=1", "--set", "llamacpp.context=2048", "--json",
    ))  # fmt: skip
    workload_id = started["workload_id"]
    try:
        stop = threading.Event()
        load = threading.Thread(target=lambda: generate_for(f"http://127.0.0.1:{port}", WAIT_S, stop))
        load.start()
        try:
            wait_for_tokens(here)
        finally:
            stop.set()
            load.join()
    finally:
        invoke("workload", "stop", workload_id, "--keep")

    [entry] = json.loads(invoke("workload", "list", "--json"))["workloads"]
    assert entry["state"] == "stopped" and entry["decode_tps"] is None
    assert entry["last_decode_tps"] > 0 and entry["last_tokens_at"] <= time.time()
    line = next(ln for ln in invoke("workload", "list").splitlines() if ln.startswith(workload_id))
    assert " last " in line and "no tokens/s" not in line, line
    assert invoke("workload", "prune").strip() == "no failed or gone workloads to drop"  # stopped stays
    assert invoke("workload", "prune", "--ended").strip() == f"dropped {workload_id}"
    assert json.loads(invoke("workload", "list", "--json")) == {"workloads": []}


def test_workload_open_prints_a_url_that_reaches_the_engine_until_ctrl_c(here):
    import signal
    import subprocess
    import sys

    import httpx

    model, port = write_demo_model(), free_port()
    started = json.loads(invoke(
        "workload", "start", "llamacpp-single", "--nodes", "local", "--model", str(model), "--http-port", str(port),
        "--set", "llamacpp.threads=1", "--json",
    ))  # fmt: skip
    workload_id = started["workload_id"]
    opener = subprocess.Popen([sys.executable, "-m", "sparksync", "workload", "open", workload_id],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        line = opener.stdout.readline()
        group = started["ranks"][0]["group"]
        assert line.startswith(f"{group} on this computer: http://"), line
        url = line.split(": ", 1)[1].split()[0]
        assert url.endswith("/v1")
        models = httpx.get(f"{url}/models", timeout=10).raise_for_status().json()["data"]
        assert models, models
    finally:
        opener.send_signal(signal.SIGINT)
        try:
            code = opener.wait(timeout=30)
        except subprocess.TimeoutExpired:
            opener.kill()  # never left behind for the next tests' process guards
            opener.wait()
            raise AssertionError(f"workload open did not end on Ctrl-C: {opener.stderr.read()}") from None
        finally:
            invoke("workload", "stop", workload_id)
        assert code == 0, opener.stderr.read()
    unknown = CliRunner().invoke(cli, ["workload", "open", "nothing-here"])
    assert unknown.exit_code != 0 and "serves HTTP" in unknown.output
