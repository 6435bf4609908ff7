"""The real llama.cpp engine runs here: streaming, metrics, and the RPC backend.

These are the facts the workload supervisor will build on: llama-server
streams chat completions with timings, counts tokens in /metrics, and with
``--rpc`` really moves the model into an rpc-server process.
"""

from __future__ import annotations

import time

import pytest

from tests.engines.engine_procs import (
    free_port,
    list_models,
    listener_traffic,
    read_metric,
    running,
    stream_chat,
    wait_http_ready,
    wait_port_open,
)
from tests.engines.tinymodel import layer_tensor_bytes

pytestmark = [pytest.mark.engine, pytest.mark.slow]

PREDICTED = "llamacpp:tokens_predicted_total"
MAX_TOKENS = 64


def _server_cmd(binaries, model, port: int, *extra: str) -> list[str]:
    return [
        str(binaries.llama_server), "-m", str(model.gguf), "--alias", model.name,
        "--host", "127.0.0.1", "--port", str(port),
        "-c", "2048", "-np", "2", "-t", "2", "--metrics", *extra,
    ]


def _wait_metric_above(base_url: str, name: str, floor: float, timeout: float = 5.0) -> float:
    """The server updates its counters when a slot is released, just after the stream ends."""
    deadline = time.monotonic() + timeout
    value = read_metric(base_url, name)
    while value <= floor and time.monotonic() < deadline:
        time.sleep(0.05)
        value = read_metric(base_url, name)
    return value


def _serve_and_measure(binaries, model, tmp_path, rounds: int = 1) -> float:
    """Start llama-server on ``model``, stream ``rounds`` answers, return the best decode tokens/s.

    The best of a few: a burst of load from elsewhere on the machine slows one answer, never
    makes one faster, so the best is the closest to the model's own speed.
    """
    port = free_port()
    best = 0.0
    with running(_server_cmd(binaries, model, port), tmp_path / f"{model.name}.log", port) as server:
        wait_http_ready(server, "/health")
        for _ in range(rounds):
            answer = stream_chat(server.base_url, model.name, "Olá! How fast is this cluster?", MAX_TOKENS)
            assert answer.usage.get("completion_tokens") == MAX_TOKENS, answer.usage
            best = max(best, answer.timings["predicted_per_second"])
    return best


def test_llama_server_streams_tokens_and_counts_them(llama_binaries, tiny_model, tmp_path):
    port = free_port()
    with running(_server_cmd(llama_binaries, tiny_model, port), tmp_path / "server.log", port) as server:
        wait_http_ready(server, "/health")
        models = [m["id"] for m in list_models(server.base_url)]
        assert tiny_model.name in models
        before = read_metric(server.base_url, PREDICTED)

        answer = stream_chat(server.base_url, tiny_model.name, "Say something about Sparks.", MAX_TOKENS)

        assert len(answer.pieces) > 1, f"expected a stream of deltas, got {answer.pieces!r}"
        assert answer.text.strip(), "the stream delivered only empty text"
        assert answer.timings["predicted_n"] == MAX_TOKENS, answer.timings
        assert answer.timings["predicted_per_second"] > 0, answer.timings
        after = _wait_metric_above(server.base_url, PREDICTED, before)
        assert after - before >= MAX_TOKENS, f"{PREDICTED} went from {before} to {after}"
    assert server.proc.returncode is not None


def test_large_model_is_measurably_slower(llama_binaries, tiny_model, tiny_model_large, tmp_path, record_property):
    small_tps = _serve_and_measure(llama_binaries, tiny_model, tmp_path, rounds=3)
    large_tps = _serve_and_measure(llama_binaries, tiny_model_large, tmp_path, rounds=3)
    record_property("tokens_per_second", {"small": small_tps, "large": large_tps})
    print(f"decode tokens/s: small {small_tps:.0f}, large {large_tps:.0f}")
    # About 10x apart here; 2x leaves room for a noisy machine.
    assert small_tps > 2 * large_tps > 0, (small_tps, large_tps)


def test_rpc_server_holds_the_offloaded_layers(llama_binaries, tiny_model, tmp_path):
    rpc_port, http_port = free_port(), free_port()
    rpc_cmd = [str(llama_binaries.rpc_server), "-H", "127.0.0.1", "-p", str(rpc_port), "-t", "1"]
    with running(rpc_cmd, tmp_path / "rpc.log", rpc_port) as rpc:
        wait_port_open(rpc)
        # -ngl 99 puts every block on the RPC device, so its weights must cross the socket.
        cmd = _server_cmd(llama_binaries, tiny_model, http_port, "--rpc", f"127.0.0.1:{rpc_port}", "-ngl", "99")
        with running(cmd, tmp_path / "server.log", http_port) as server:
            wait_http_ready(server, "/health")
            loaded = listener_traffic(rpc_port)
            assert loaded.received >= layer_tensor_bytes(tiny_model.spec), (
                f"rpc-server received only {loaded.received} bytes while the model loaded")

            answer = stream_chat(server.base_url, tiny_model.name, "Split me across nodes.", MAX_TOKENS)

            assert answer.timings["predicted_n"] == MAX_TOKENS and answer.text.strip()
            # Every decoded token runs its layers remotely: inputs go in, results come back.
            decoded = listener_traffic(rpc_port)
            assert decoded.received > loaded.received and decoded.sent > loaded.sent, (loaded, decoded)
        assert "Accepted client connection" in rpc.log_tail(), "rpc-server never logged llama-server's connection"
