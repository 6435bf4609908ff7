"""The generated llama.cpp launches, run for real on this machine.

One node: the generated llama-server argv, waited for with the generated
readiness probe, its tokens counted through the generated tokens source.
Two nodes: two loopback addresses (127.0.0.1 and 127.0.0.2) stand in for two
nodes' fabric IPs; the generated rpc-server binds the second, the generated
llama-server on the first offloads its layers to it.
"""

from __future__ import annotations

import signal
import time

import pytest

from sparksync.core.workloads.fabric import Fabric, NodeFabric
from sparksync.core.workloads.launch_spec import TokensSource
from sparksync.core.workloads.launches import build_group
from sparksync.core.workloads.orchestrator import LAST_LINES
from sparksync.core.workloads.recipe import Recipe
from tests.core.workloads.fakes import net
from tests.core.workloads.launch_runner import TEST_READY_TIMEOUT_S, read_counters, running_group, start
from tests.engines.conftest import _tiny_models_dir, _tiny_tokenizer, llama_binaries, tiny_model  # noqa: F401
from tests.engines.engine_procs import free_port, listener_traffic, stream_chat
from tests.engines.tinymodel import layer_tensor_bytes

pytestmark = [pytest.mark.engine, pytest.mark.slow]

MAX_TOKENS = 32


def tiny_recipe(binaries, model, pipeline: int = 1) -> Recipe:
    return Recipe.model_validate({
        "name": "tiny", "engine": "llama.cpp", "model": str(model.gguf), "served_name": model.name,
        "parallelism": {"pipeline": pipeline}, "ports": {"http": free_port(), "rpc": free_port()},
        "llamacpp": {"server_binary": str(binaries.llama_server), "rpc_binary": str(binaries.rpc_server),
                     "context": 2048, "parallel": 2, "threads": 1},
    })  # fmt: skip


def counters_after(source: TokensSource, before: dict[str, float], timeout: float = 5.0) -> dict[str, float]:
    """llama-server updates its counters as the slot is released, just after the stream ends."""
    deadline = time.monotonic() + timeout
    after = read_counters(source)
    while after[source.decode_counter] <= before[source.decode_counter] and time.monotonic() < deadline:
        time.sleep(0.05)
        after = read_counters(source)
    return after


def chat_and_count(head, model) -> tuple[dict, dict]:
    source = head.launch.tokens_source
    before = read_counters(source)
    url = f"http://{head.launch.readiness.host}:{head.launch.readiness.port}"
    answer = stream_chat(url, model.name, "Olá, Sparks! Split me across nodes.", MAX_TOKENS)
    assert answer.timings["predicted_n"] == MAX_TOKENS and answer.text.strip()
    return before, counters_after(source, before)


def test_single_node_recipe_runs_as_generated(llama_binaries, tiny_model, tmp_path):  # noqa: F811
    group = build_group("tiny-1", tiny_recipe(llama_binaries, tiny_model), ["this-computer"], Fabric())
    with running_group(group, tmp_path) as ranks:
        (head,) = ranks
        assert head.launch.readiness.kind == "http" and head.launch.tokens_source.kind == "prometheus"
        before, after = chat_and_count(head, tiny_model)
    decode, prefill = head.launch.tokens_source.decode_counter, head.launch.tokens_source.prefill_counter
    assert after[decode] - before[decode] >= MAX_TOKENS, (before, after)
    assert after[prefill] > before[prefill], (before, after)
    assert head.proc.returncode is not None


def loopback_node(name: str, ip: str) -> NodeFabric:
    return NodeFabric.from_samples(name, [net("enp1s0f0np0", ip)])


def test_two_node_rpc_recipe_runs_as_generated_on_loopback(llama_binaries, tiny_model, tmp_path):  # noqa: F811
    fabric = Fabric.of([loopback_node("node-a", "127.0.0.1"), loopback_node("node-b", "127.0.0.2")])
    recipe = tiny_recipe(llama_binaries, tiny_model, pipeline=2)
    group = build_group("tiny-1", recipe, ["node-a", "node-b"], fabric)
    assert [(r.node, r.role) for r in group.ranks] == [("node-b", "rpc-server"), ("node-a", "llama-server")]
    assert group.ranks[0].argv[1:5] == ["-H", "127.0.0.2", "-p", str(recipe.ports.rpc)]

    with running_group(group, tmp_path) as (rpc, head):
        loaded = listener_traffic(recipe.ports.rpc)
        assert loaded.received >= layer_tensor_bytes(tiny_model.spec), (
            f"rpc-server received only {loaded.received} bytes while the model loaded"
        )
        before, after = chat_and_count(head, tiny_model)
        decoded = listener_traffic(recipe.ports.rpc)
    # Every decoded token ran its layers on the "other node": inputs went in, results came back.
    assert decoded.received > loaded.received and decoded.sent > loaded.sent, (loaded, decoded)
    assert (
        after[head.launch.tokens_source.decode_counter] - before[head.launch.tokens_source.decode_counter]
        >= MAX_TOKENS
    )
    assert "127.0.0.2" in rpc.log_text()
    assert rpc.proc.returncode is not None and head.proc.returncode is not None


def test_an_unreachable_rpc_server_is_named_in_the_heads_last_lines(llama_binaries, tiny_model, tmp_path):  # noqa: F811
    """ggml aborts; without a debugger's backtrace the reason is what the user is shown."""
    fabric = Fabric.of([loopback_node("node-a", "127.0.0.1"), loopback_node("node-b", "127.0.0.2")])
    recipe = tiny_recipe(llama_binaries, tiny_model, pipeline=2)
    head = build_group("tiny-1", recipe, ["node-a", "node-b"], fabric).ranks[-1]
    assert head.role == "llama-server"
    rank = start(head, tmp_path)  # no rpc-server on node-b: nothing listens there
    try:
        rank.proc.wait(TEST_READY_TIMEOUT_S)
    finally:
        rank.stop()
    assert rank.proc.returncode == -signal.SIGABRT, rank.log_text()[-2000:]
    last = rank.log_text().splitlines()[-LAST_LINES:]
    assert any(f"Failed to connect to 127.0.0.2:{recipe.ports.rpc}" in line for line in last), last
    assert not any("ggml_print_backtrace" in line for line in rank.log_text().splitlines()), last
