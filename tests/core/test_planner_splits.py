"""Each split has its own bound: tensor parallel, layer split (llama.cpp RPC) and replicas.

Every expected figure is the hand-worked arithmetic of docs/planner.md ("Each split
its own bound"), written out here, not taken from the code under test.
"""

from __future__ import annotations

import pytest

from sparksync.core.bench.bounds import run_bounds
from sparksync.core.bench.profile import BenchProfile
from sparksync.core.planner import decode_bound, prefill_bound, split_for_engine, split_label, split_model
from tests.core.test_planner_bounds import KV_8K, QWEN_27B, WEIGHTS

BANDWIDTH = 273e9
ONE_NODE_STEP = (WEIGHTS + KV_8K) / BANDWIDTH  # 63.498 ms
HOP = 20e-6 + 5120 * 2 / 25e9  # one activation transfer: latency + 10,240 B at 25 GB/s = 20.41 us
PREFILL_FLOPS = 2 * 27e9 * 8192 + 2 * 64 * 8192**2 * 64 * 128  # 512.7 TFLOP
PREFILL_HOP = 20e-6 + 8192 * 5120 * 2 / 25e9  # the whole prompt's hidden states: 3.375 ms


def test_a_layer_split_reads_everything_in_turn_plus_one_transfer_per_boundary():
    two = decode_bound(QWEN_27B, 2, context=8192, split="layer")
    assert two.memory_seconds == pytest.approx(ONE_NODE_STEP)
    assert two.comm_seconds == pytest.approx(HOP)
    assert two.tokens_per_second == pytest.approx(1 / (ONE_NODE_STEP + HOP))  # 15.743 tok/s
    assert two.tokens_per_second == pytest.approx(15.743, abs=1e-3)
    eight = decode_bound(QWEN_27B, 8, context=8192, split="layer")
    assert eight.tokens_per_second == pytest.approx(1 / (ONE_NODE_STEP + 7 * HOP))  # 15.713 tok/s
    # Never the tensor-parallel model's all-reduces: it cannot be far below one node.
    one = decode_bound(QWEN_27B, 1, context=8192)
    assert one.tokens_per_second * 0.99 < eight.tokens_per_second < one.tokens_per_second


def test_a_layer_split_prefill_takes_the_whole_prompt_through_each_node_in_turn():
    two = prefill_bound(QWEN_27B, 2, prompt_tokens=8192, split="layer")
    assert two.compute_seconds == pytest.approx(PREFILL_FLOPS / 500e12)  # 1.0255 s
    assert two.comm_seconds == pytest.approx(PREFILL_HOP)
    assert two.tokens_per_second == pytest.approx(8192 / (PREFILL_FLOPS / 500e12 + PREFILL_HOP))  # 7,962
    assert two.tokens_per_second == pytest.approx(7962.3, abs=0.1)


def test_tensor_parallel_keeps_two_all_reduces_per_layer():
    eight = decode_bound(QWEN_27B, 8, context=8192, split="tensor")
    all_reduce = 20e-6 + 2 * 7 / 8 * 10240 / 25e9
    assert eight.comm_seconds == pytest.approx(128 * all_reduce)
    assert eight.tokens_per_second == pytest.approx(1 / (ONE_NODE_STEP / 8 + 128 * all_reduce))  # 94.44


def test_replicas_add_up_and_give_one_node_at_concurrency_one():
    one = decode_bound(QWEN_27B, 1, context=8192)
    assert decode_bound(QWEN_27B, 8, context=8192, split="replica").tokens_per_second == pytest.approx(
        one.tokens_per_second)
    eight = decode_bound(QWEN_27B, 8, context=8192, batch=8, split="replica")
    assert eight.tokens_per_second == pytest.approx(8 / ONE_NODE_STEP)  # 125.99 tok/s
    # Three sequences on two replicas: one holds two, the other one.
    three = decode_bound(QWEN_27B, 2, context=8192, batch=3, split="replica")
    two_seq = (WEIGHTS + 2 * KV_8K) / BANDWIDTH
    assert three.tokens_per_second == pytest.approx(2 / two_seq + 1 / ONE_NODE_STEP)
    prefill = prefill_bound(QWEN_27B, 8, prompt_tokens=8192, batch=8, split="replica")
    assert prefill.tokens_per_second == pytest.approx(8 * 8192 / (PREFILL_FLOPS / 500e12))  # 63,908


def test_each_split_names_its_model_and_llama_cpp_is_a_layer_split():
    assert split_for_engine("llama.cpp", 2) == "layer" and split_for_engine("llama.cpp", 1) == "tensor"
    assert split_for_engine("vllm", 8) == "tensor" and split_for_engine(None, 8) == "tensor"
    assert split_label("tensor", 8) == "TP×8" and split_label("layer", 2) == "layers×2"
    assert split_label("replica", 8) == "8 replicas" and split_label("layer", 1) == "1 node"
    assert "layer split over 2 nodes" in split_model("layer", 2)


def test_a_benchmark_of_llama_cpp_rpc_is_bounded_by_the_layer_split():
    profile = BenchProfile(pp=[8192], tg=[256], concurrency=[1])
    layer = run_bounds(QWEN_27B, profile, 2, split="layer")
    tensor = run_bounds(QWEN_27B, profile, 2)
    one = run_bounds(QWEN_27B, profile, 1)
    assert layer.bound_label == "layers×2" and tensor.bound_label == "TP×2"
    # The old (tensor-parallel) model put the 2-node RPC bound far from one node's; the layer split does not.
    assert layer.headline.decode_tps == pytest.approx(one.headline.decode_tps, rel=0.01)
