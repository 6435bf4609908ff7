"""Live tokens/s while llama-server generates one long answer, read by a real agent through /slots.

llama.cpp adds an answer's tokens to its counter only when the answer ends, so
before the slots were read every sample during a long answer said 0. Here one
long answer streams from a real llama-server under a real agent: most samples
taken while it generates must be above zero, and their mean must be within
20 % of the decode speed the server itself reports at the end.
"""

from __future__ import annotations

import statistics
import time

import pytest

from sparksync.core.workloads.fabric import Fabric
from sparksync.core.workloads.launches import build_group
from sparksync.core.workloads.recipe import Recipe
from sparksync_agent.protocol import RankState
from tests.agent.supervisor.test_supervisor_real import wait_state
from tests.engines.conftest import (  # noqa: F401 - fixtures
    _tiny_models_dir,
    _tiny_tokenizer,
    llama_binaries,
    tiny_model_large,
)
from tests.engines.engine_procs import free_port, stream_chat

pytestmark = [pytest.mark.engine, pytest.mark.slow]

ANSWER_TOKENS = 3000  # at a few hundred tok/s on one thread: long enough for many samples
EDGE_S = 1.5  # samples this close to the answer's start or end span time without generation


def long_answer_recipe(binaries, model) -> Recipe:
    return Recipe.model_validate({
        "name": "live", "engine": "llama.cpp", "model": str(model.gguf), "served_name": model.name,
        "ports": {"http": free_port()}, "readiness": {"kind": "http", "path": "/v1/models"},
        "llamacpp": {"server_binary": str(binaries.llama_server), "context": 4096, "parallel": 1, "threads": 1},
    })  # fmt: skip


def test_tokens_per_second_follow_one_long_answer_as_it_is_generated(
    supervised,
    llama_binaries,  # noqa: F811 - a fixture
    tiny_model_large,  # noqa: F811 - a fixture
):
    client = supervised.client
    recipe = long_answer_recipe(llama_binaries, tiny_model_large)
    (launch,) = build_group("live-1", recipe, ["this-computer"], Fabric()).ranks
    assert launch.tokens_source.slots_path == "/slots" and "--slots" in launch.argv
    client.start_rank("live", launch)
    wait_state(client, "live", RankState.ready, timeout=120)
    since = client.telemetry(0).last_seq

    began = time.time()
    answer = stream_chat(f"http://127.0.0.1:{launch.ports[0]}", tiny_model_large.name, "Tell a long story.",
                         ANSWER_TOKENS)  # fmt: skip
    ended = time.time()
    time.sleep(1.5)  # the samples of the answer's last second
    assert answer.usage.get("completion_tokens") == ANSWER_TOKENS, answer.usage
    server_tps = answer.timings["predicted_per_second"]
    generating_from = began + answer.timings["prompt_ms"] / 1000

    samples = client.telemetry(since).samples
    during = [
        next((f.decode_tps or 0.0 for f in s.workloads or [] if f.workload_id == "live"), 0.0)
        for s in samples
        if generating_from + EDGE_S <= s.ts <= ended - EDGE_S
    ]
    client.stop_workload("live", grace_s=10.0)

    assert ended - began > 4 * EDGE_S, f"the answer took {ended - began:.1f} s: too short to sample"
    assert len(during) >= 4, f"{len(during)} samples during {ended - began:.1f} s of generation"
    live = [v for v in during if v > 0]
    mean = statistics.fmean(during)
    print(f"\nlong answer: server {server_tps:.1f} tok/s; agent samples {[round(v) for v in during]} "
          f"(mean {mean:.1f}, {len(live)} of {len(during)} above zero)")  # fmt: skip
    assert len(live) > len(during) / 2, f"most samples during the answer read 0: {during}"
    assert mean == pytest.approx(server_tps, rel=0.2), (mean, server_tps, during)
