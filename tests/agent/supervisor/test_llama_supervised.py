"""A real llama-server under a real agent: ready via /v1/models, tokens/s live in the telemetry, clean stop."""

from __future__ import annotations

import threading

import psutil
import pytest

from sparksync.core.workloads.fabric import Fabric
from sparksync.core.workloads.launches import build_group
from sparksync.core.workloads.recipe import Recipe
from sparksync_agent.protocol import RankState
from tests.agent.supervisor.conftest import pid_gone, wait_until
from tests.agent.supervisor.test_supervisor_real import rank_of, wait_state
from tests.engines.conftest import (  # noqa: F401 - fixtures
    _tiny_models_dir,
    _tiny_tokenizer,
    llama_binaries,
    tiny_model,
)
from tests.engines.engine_procs import free_port, stream_chat

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def tiny_recipe(binaries, model) -> Recipe:
    return Recipe.model_validate({
        "name": "tiny", "engine": "llama.cpp", "model": str(model.gguf), "served_name": model.name,
        "ports": {"http": free_port()}, "readiness": {"kind": "http", "path": "/v1/models"},
        "llamacpp": {"server_binary": str(binaries.llama_server), "context": 2048, "parallel": 2, "threads": 1},
    })  # fmt: skip


class ChatLoad:
    """Streams chat completions back to back from a thread until stopped."""

    def __init__(self, url: str, model: str):
        self.url, self.model = url, model
        self.done = threading.Event()
        self.answers = 0
        self.thread = threading.Thread(target=self._run, name="chat-load")

    def _run(self) -> None:
        while not self.done.is_set():
            stream_chat(self.url, self.model, f"Question {self.answers}: how fast is this cluster?", 64)
            self.answers += 1

    def __enter__(self) -> ChatLoad:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join(timeout=120)


def _workload_figures(client, since: int):
    page = client.telemetry(since)
    found = [f for s in page.samples for f in (s.workloads or []) if f.workload_id == "tiny"]
    return page.last_seq, found


def test_llama_server_runs_under_the_agent_with_live_tokens_per_second(
    supervised,
    llama_binaries,  # noqa: F811 - a fixture
    tiny_model,  # noqa: F811 - a fixture
):
    client = supervised.client
    (launch,) = build_group(
        "tiny-1", tiny_recipe(llama_binaries, tiny_model), ["this-computer"], Fabric()
    ).ranks
    assert launch.readiness.path == "/v1/models" and launch.tokens_source.kind == "prometheus"
    client.start_rank("tiny", launch)
    status = wait_state(client, "tiny", RankState.ready, timeout=120)
    engine = wait_until(lambda: psutil.Process(status.pid).children(), "llama-server under its keeper")[0]
    agent = psutil.Process(supervised.agent.proc.pid)

    url = f"http://127.0.0.1:{launch.ports[0]}"
    since, figures = client.telemetry(0).last_seq, []
    with ChatLoad(url, tiny_model.name) as load:
        agent_cpu, engine_cpu = sum(agent.cpu_times()[:2]), sum(engine.cpu_times()[:2])

        def decoding():
            nonlocal since
            since, found = _workload_figures(client, since)
            figures.extend(found)
            return [f for f in found if f.decode_tps and f.prefill_tps is not None]

        live = wait_until(
            decoding, "decode tokens/s in the telemetry while chats stream", timeout=120, interval=0.5
        )
        wait_until(lambda: load.answers >= 3, "a few answers streamed", timeout=120)
        agent_cpu, engine_cpu = (
            sum(agent.cpu_times()[:2]) - agent_cpu,
            sum(engine.cpu_times()[:2]) - engine_cpu,
        )
    assert load.answers >= 3
    assert live[0].state is RankState.ready and live[0].name == launch.process_name and live[0].decode_tps > 0
    metrics = client.metrics()
    assert (
        f'sparksync_workload_decode_tokens_per_second{{group="tiny-1",process="{launch.process_name}"'
        in metrics
    )
    print(
        f"\nsupervised llama-server: peak decode {max(f.decode_tps or 0 for f in figures):.0f} tok/s; "
        f"agent CPU {agent_cpu:.2f} s vs engine CPU {engine_cpu:.2f} s "
        f"({100 * agent_cpu / max(engine_cpu, 1e-9):.1f}%; the agent also samples telemetry at 2 Hz)"
    )

    stopped = client.stop_workload("tiny", grace_s=10.0).ranks[0]
    assert stopped.state is RankState.stopped
    wait_until(
        lambda: pid_gone(engine.pid) and pid_gone(status.pid), "llama-server and its keeper to be gone"
    )
    assert supervised.keeper_pids() == []
    wait_until(
        lambda: client.snapshot().latest and not client.snapshot().latest.workloads, "figures gone after stop"
    )
    assert rank_of(client, "tiny").log_last_seq > 0  # llama-server's own output was captured
