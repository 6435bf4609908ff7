"""What supervising costs: the agent's CPU while a supervised llama-server streams at full speed.

A real agent runs a tiny llama-server as a workload rank (its keeper, the log
pipe, the 5 Hz liveness and log poll, the 1 Hz tokens/s scrape, telemetry at
1 Hz). The load generator streams chat completions back to back. The figures:
the agent's and the keeper's CPU seconds beside the engine's over the same
window, and, as the anchor, the same agent's CPU over an equal window with the
rank idle. Target (issue): the agent's CPU < 1 % of the engine's.

The engine gets a CPU to itself where there are two or more CPUs. Default run:
about a minute and a half; SPARKSYNC_PERF_SCALE scales it.
"""

from __future__ import annotations

import time

import psutil
import pytest

from sparksync.core.agents.client import AgentClient
from sparksync.core.workloads.fabric import Fabric
from sparksync.core.workloads.launches import build_group
from sparksync.core.workloads.recipe import Recipe
from sparksync_agent.protocol import RankState
from tests.agent.agentproc import start_agent
from tests.engines.conftest import (  # noqa: F401  (fixtures this benchmark uses)
    _tiny_models_dir,
    _tiny_tokenizer,
    llama_binaries,
    tiny_model,
)
from tests.engines.engine_procs import free_port
from tests.perf.report import Report, assert_targets
from tests.perf.settings import Durations, scale_from_env
from tests.perf.cpu_split import engine_apart
from tests.perf.switchyard_bench import Load, Route, Window, cpu_seconds, run_window

pytestmark = [
    pytest.mark.perf,
    pytest.mark.engine,
    pytest.mark.timeout(Durations(scale_from_env()).timeout_s),
]

TARGET_SHARE = 0.01
CONCURRENCY = 4
MAX_TOKENS = 64


def _recipe(binaries, model) -> Recipe:
    return Recipe.model_validate(
        {
            "name": "tiny", "engine": "llama.cpp", "model": str(model.gguf), "served_name": model.name,
            "ports": {"http": free_port()},
            "llamacpp": {"server_binary": str(binaries.llama_server), "context": 4096, "parallel": CONCURRENCY, "threads": 1},
        }
    )  # fmt: skip


def _wait(check, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError("timed out")


def _stream_for(url: str, model: str, seconds: float) -> Window:
    """CONCURRENCY closed-loop streams of MAX_TOKENS straight to the engine, counted for ``seconds``."""
    load = Load(CONCURRENCY, seconds, settle_s=0.5, min_tokens=MAX_TOKENS, max_tokens=MAX_TOKENS)
    windows, _side = run_window([Route("direct", url, model)], load)
    return windows["direct"]


def test_supervisor_cpu_beside_the_engine(llama_binaries, tiny_model, tmp_path, durations, perf_out):  # noqa: F811
    agent = start_agent(tmp_path / "state", tmp_path / "agent.log", "--sample-hz", "1")
    client = AgentClient(agent.base_url, agent.token, timeout=30.0)
    try:
        (launch,) = build_group(
            "tiny-1", _recipe(llama_binaries, tiny_model), ["this-computer"], Fabric()
        ).ranks
        client.start_rank("perf", launch)
        _wait(lambda: client.workload("perf").ranks[0].state is RankState.ready)
        keeper = psutil.Process(client.workload("perf").ranks[0].pid)
        engine = _wait(keeper.children)[0]
        agent_proc = psutil.Process(agent.proc.pid)
        url = f"http://127.0.0.1:{launch.ports[0]}"
        with engine_apart(engine.pid) as split:
            _stream_for(url, tiny_model.name, max(1.0, durations.warmup_s))
            idle_before = cpu_seconds([agent_proc])
            time.sleep(durations.cpu_s)
            idle_agent = cpu_seconds([agent_proc]) - idle_before
            before = {
                "agent": cpu_seconds([agent_proc]),
                "keeper": cpu_seconds([keeper]),
                "engine": cpu_seconds([engine]),
            }
            window = _stream_for(url, tiny_model.name, durations.cpu_s)
            used = {
                "agent": cpu_seconds([agent_proc]) - before["agent"],
                "keeper": cpu_seconds([keeper]) - before["keeper"],
                "engine": cpu_seconds([engine]) - before["engine"],
            }
        figures = client.snapshot().latest.workloads
        client.stop_workload("perf", grace_s=10.0)
    finally:
        client.close()
        agent.stop()

    report = Report("supervisor_overhead")
    report.figure("window_s", durations.cpu_s, "window", "s")
    report.figure("cpus_split", split is not None, "engine on its own CPU")
    report.figure("tokens_per_s", window.tokens_per_s, "streamed tokens/s (load generator)", "tok/s")
    report.figure(
        "agent_decode_tps",
        figures[0].decode_tps if figures else None,
        "decode tok/s the agent reported",
        "tok/s",
    )
    report.figure("engine_cpu_s", used["engine"], "engine CPU while streaming", "s")
    report.figure("agent_cpu_s", used["agent"], "agent CPU while streaming", "s")
    report.figure("keeper_cpu_s", used["keeper"], "keeper CPU while streaming (log copy)", "s")
    report.figure("agent_idle_cpu_s", idle_agent, "anchor: agent CPU, same window, rank idle", "s")
    share = used["agent"] / used["engine"] if used["engine"] else float("inf")
    report.figure("agent_share", share, "agent CPU / engine CPU")
    added = (used["agent"] - idle_agent + used["keeper"]) / used["engine"] if used["engine"] else float("inf")
    report.figure("supervision_added_share", added, "(agent - idle anchor + keeper) / engine CPU")
    report.check("agent CPU < 1% of the engine's", share < TARGET_SHARE, f"{100 * share:.2f}%")
    report.publish(perf_out)
    assert window.tokens and not window.errors
    assert_targets(report)
