"""Speed bounds, worked by hand on the published 27 B model (Qwen3.8-27B-NVFP4).

The report gives only the parameter count. The shape below is an ASSUMPTION, a
Qwen3-32B-like dense model: 64 layers, 8 KV heads of 128 dims, hidden 5120, 64
query heads. Weights: 27e9 x 0.5625 B = 15.1875 GB.
"""

from __future__ import annotations

import pytest

from sparksync.core.planner.bounds import (
    ALLREDUCES_PER_LAYER,
    Hardware,
    allreduce_seconds,
    decode_bound,
    percent_of_bound,
    prefill_bound,
)
from sparksync.core.planner.errors import PlanInputError
from sparksync.core.planner.model import ModelSpec

QWEN_27B = ModelSpec(
    name="Qwen3.8-27B-NVFP4",
    params=27e9,
    quant="nvfp4",
    layers=64,
    kv_heads=8,
    head_dim=128,
    hidden=5120,
    attention_heads=64,
)
WEIGHTS = 15.1875e9
KV_8K = 64 * 8 * 128 * 2 * 2 * 8192  # 262,144 B per token x 8,192 tokens = 2,147,483,648 B


def test_one_node_without_kv_is_bandwidth_over_weights():
    # 273 GB/s / 15.1875 GB = 17.98 tok/s: the floor of every memory-bound estimate.
    bound = decode_bound(QWEN_27B.model_copy(update={"layers": None, "kv_heads": None}), 1)
    assert bound.tokens_per_second == pytest.approx(273e9 / WEIGHTS)
    assert not bound.kv_counted


def test_one_node_at_8k_context_reads_the_cache_too():
    # (15.1875 + 2.1475) GB per token at 273 GB/s = 63.50 ms -> 15.75 tok/s.
    bound = decode_bound(QWEN_27B, 1, context=8192)
    assert bound.kv_bytes_per_node == KV_8K
    assert bound.comm_seconds == 0
    assert bound.tokens_per_second == pytest.approx(273e9 / (WEIGHTS + KV_8K))
    assert bound.tokens_per_second == pytest.approx(15.75, abs=0.01)


def test_published_one_node_result_is_75_percent_of_the_bound():
    # 11.86 / 15.75 = 75.3 %.
    bound = decode_bound(QWEN_27B, 1, context=8192)
    assert percent_of_bound(11.86, bound.tokens_per_second) == pytest.approx(75.3, abs=0.1)


def test_eight_nodes_add_two_all_reduces_per_layer():
    # Memory: (15.1875 + 2.1475) GB / 8 / 273 GB/s = 7.937 ms.
    # One all-reduce of 5120 x 2 B = 10,240 B over 8 nodes: 20 us + 2 x 7/8 x 10,240 B
    # / 25 GB/s = 20.72 us; x 2 per layer x 64 layers = 2.652 ms. Step: 10.589 ms -> 94.4 tok/s.
    bound = decode_bound(QWEN_27B, 8, context=8192)
    memory = (WEIGHTS + KV_8K) / 8 / 273e9
    comm = ALLREDUCES_PER_LAYER * 64 * (20e-6 + 2 * 7 / 8 * 10_240 / 25e9)
    assert bound.memory_seconds == pytest.approx(memory)
    assert bound.comm_seconds == pytest.approx(comm)
    assert bound.tokens_per_second == pytest.approx(1 / (memory + comm))
    assert bound.tokens_per_second == pytest.approx(94.4, abs=0.1)


def test_published_eight_node_result_is_56_percent_of_the_bound():
    # 52.58 / 94.44 = 55.7 %: the fabric's fixed costs eat more at 8 nodes than at 1.
    bound = decode_bound(QWEN_27B, 8, context=8192)
    assert percent_of_bound(52.58, bound.tokens_per_second) == pytest.approx(55.7, abs=0.1)


def test_a_free_fabric_scales_decode_linearly():
    # With no latency and an (almost) infinite link, 8 nodes read 1/8 each: exactly 8x.
    ideal = Hardware(allreduce_latency_us=0, link_gbps=1e12)
    one = decode_bound(QWEN_27B, 1, ideal, context=8192)
    eight = decode_bound(QWEN_27B, 8, ideal, context=8192)
    assert eight.tokens_per_second == pytest.approx(8 * one.tokens_per_second, rel=1e-6)


def test_bandwidth_is_an_input():
    # Half the bandwidth, half the one-node bound.
    slow = decode_bound(QWEN_27B, 1, Hardware(memory_bandwidth_gbs=136.5), context=8192)
    assert slow.tokens_per_second == pytest.approx(
        decode_bound(QWEN_27B, 1, context=8192).tokens_per_second / 2
    )


def test_ring_all_reduce_cost():
    # 1 MB over 4 nodes at 200 Gb/s: 2 x 3/4 x 1e6 B / 25e9 B/s = 60 us, plus 20 us latency.
    assert allreduce_seconds(1e6, 4, Hardware()) == pytest.approx(80e-6)
    assert allreduce_seconds(1e6, 1, Hardware()) == 0


def test_batch_shares_the_weight_reads():
    # 4 sequences per step read the weights once and 4 caches: (15.19 + 4 x 2.15) GB per step
    # -> 4 / 87.0 ms = 45.9 tok/s in all, 11.5 per sequence.
    bound = decode_bound(QWEN_27B, 1, context=8192, batch=4)
    step = (WEIGHTS + 4 * KV_8K) / 273e9
    assert bound.tokens_per_second == pytest.approx(4 / step)
    assert bound.per_sequence_tokens_per_second == pytest.approx(1 / step)


def test_moe_reads_only_its_active_experts():
    # A 120 B MoE with 5 B active in MXFP4: one token reads 5/120 of 63.75 GB = 2.66 GB
    # -> 273 / 2.656 = 102.8 tok/s; a batch of 64 touches all experts (capped at all weights).
    moe = ModelSpec(params=120e9, active_params=5e9, quant="mxfp4")
    weights = 120e9 * 17 / 32
    assert decode_bound(moe, 1).tokens_per_second == pytest.approx(273e9 / (weights * 5 / 120))
    assert decode_bound(moe, 1, batch=64).weight_bytes_per_node == pytest.approx(weights)


def test_prefill_is_compute_plus_fabric():
    # FLOPs for 8,192 tokens: 2 x 27e9 x 8192 = 442.4 TFLOP of matmuls, plus causal attention
    # 2 x 64 layers x 8192^2 x 64 heads x 128 = 70.4 TFLOP. At 500 TFLOP/s (FP4, assumed):
    # 1.0255 s on one node -> 7,989 tok/s.
    bound = prefill_bound(QWEN_27B, 1, prompt_tokens=8192)
    flops = 2 * 27e9 * 8192 + 2 * 64 * 8192**2 * 64 * 128
    assert bound.precision == "fp4" and bound.flops == pytest.approx(flops)
    assert bound.tokens_per_second == pytest.approx(8192 / (flops / 500e12))


def test_prefill_on_eight_nodes_is_bound_by_the_fabric():
    # The all-reduces now carry 8,192 tokens x 10,240 B = 83.9 MB each: 2 x 7/8 x 83.9 MB /
    # 25 GB/s = 5.87 ms, x 128 = 752 ms against 128 ms of compute. Prefill scales far less
    # than decode, as the published 1.94x (prefill) against 4.43x (decode) shows.
    one = prefill_bound(QWEN_27B, 1)
    eight = prefill_bound(QWEN_27B, 8)
    assert eight.comm_seconds > 5 * eight.compute_seconds
    assert eight.tokens_per_second / one.tokens_per_second < 2


def test_bf16_prefill_runs_at_the_bf16_peak():
    model = QWEN_27B.model_copy(update={"quant": "bf16"})
    assert prefill_bound(model, 1).peak_tflops_per_node == 125.0


def test_multi_node_bounds_need_layers_and_hidden():
    with pytest.raises(PlanInputError, match="--layers and --hidden"):
        decode_bound(ModelSpec(params=27e9, quant="nvfp4"), 2)


@pytest.mark.parametrize(("measured", "bound"), [(-1, 10), (5, 0)])
def test_percent_of_bound_rejects_nonsense(measured, bound):
    with pytest.raises(PlanInputError, match="cannot compare"):
        percent_of_bound(measured, bound)


def test_bad_node_count_or_batch():
    with pytest.raises(PlanInputError, match="nodes must be at least 1"):
        decode_bound(QWEN_27B, 0)
    with pytest.raises(PlanInputError, match="batch must be at least 1"):
        prefill_bound(QWEN_27B, 1, batch=0)
