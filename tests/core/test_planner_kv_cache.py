"""KV-cache maths on published model shapes, each expectation worked by hand."""

from __future__ import annotations

import pytest

from sparksync.core.planner.errors import PlanInputError, UnknownQuantError
from sparksync.core.planner.kv_cache import (
    kv_bytes_per_token,
    kv_cache_bytes,
    kv_cache_bytes_per_node,
    node_kv_share,
)
from sparksync.core.planner.model import ModelSpec

# Llama-3-70B (config.json): 80 layers, 8 KV heads of 128 dims, hidden 8192, 64 query heads.
LLAMA_70B = ModelSpec(
    params=70.6e9, quant="bf16", layers=80, kv_heads=8, head_dim=128, hidden=8192, attention_heads=64
)
# DeepSeek-V3 (config.json): 61 layers, MLA with kv_lora_rank 512 and qk_rope_head_dim 64.
DEEPSEEK_V3 = ModelSpec(
    params=671e9, quant="fp8", layers=61, hidden=7168, attention_heads=128, head_dim=128, mla_kv_dim=512 + 64
)


def test_llama_70b_costs_320_kib_per_token():
    # 80 layers x 8 heads x 128 dims x 2 (K and V) x 2 bytes = 327,680 B = 320 KiB.
    assert kv_bytes_per_token(LLAMA_70B) == 327_680


def test_cache_grows_with_context_and_concurrency():
    # 8,192 tokens x 327,680 B = 2,684,354,560 B (2.5 GiB) per sequence; 4 sequences: x 4.
    assert kv_cache_bytes(LLAMA_70B, 8192) == 2_684_354_560
    assert kv_cache_bytes(LLAMA_70B, 8192, concurrency=4) == 4 * 2_684_354_560


def test_fp8_cache_halves_it():
    assert kv_cache_bytes(LLAMA_70B, 8192, kv_dtype="fp8") == 2_684_354_560 / 2


def test_tensor_parallel_splits_kv_heads():
    # 8 KV heads over 2 nodes: 4 each, half the cache; over 8 nodes: one head each.
    assert node_kv_share(LLAMA_70B, 2) == 0.5
    assert kv_cache_bytes_per_node(LLAMA_70B, 8, 8192) == 2_684_354_560 / 8


def test_more_nodes_than_kv_heads_replicates_heads():
    # Qwen2.5-7B-like: 4 KV heads. On 8 nodes each node still holds a whole head: 1/4.
    model = ModelSpec(params=7e9, quant="bf16", layers=28, kv_heads=4, head_dim=128)
    assert node_kv_share(model, 8) == 0.25


def test_uneven_split_rounds_heads_up():
    # 8 KV heads on 3 nodes: the busiest node holds ceil(8/3) = 3 heads = 3/8 of the cache.
    assert node_kv_share(LLAMA_70B, 3) == 3 / 8


def test_mla_caches_one_latent_per_layer_and_every_node_holds_it():
    # 61 layers x 576 values x 2 bytes = 70,272 B per token: a fraction of GQA's cost...
    assert kv_bytes_per_token(DEEPSEEK_V3) == 70_272
    # ...but the latent is shared by all heads, so tensor parallelism does not split it.
    assert node_kv_share(DEEPSEEK_V3, 8) == 1.0


def test_hybrid_models_cache_only_full_attention_layers():
    # 48 layers, 12 of them full attention (one in four): a quarter of the all-attention cost.
    full = ModelSpec(params=30e9, quant="bf16", layers=48, kv_heads=2, head_dim=256)
    hybrid = full.model_copy(update={"kv_layers": 12})
    assert kv_bytes_per_token(hybrid) * 4 == kv_bytes_per_token(full)


def test_quantised_llama_cpp_cache():
    # q8_0 cache: 34 B per 32 values -> 327,680 / 2 x 34/32 = 174,080 B per token.
    assert kv_bytes_per_token(LLAMA_70B, "q8_0") == 174_080


def test_missing_shape_says_which_options_to_give():
    with pytest.raises(PlanInputError, match="--layers, --kv-heads and --head-dim"):
        kv_cache_bytes(ModelSpec(params=7e9, quant="bf16"), 8192)


@pytest.mark.parametrize(("context", "concurrency"), [(0, 1), (8192, 0), (-5, 1)])
def test_bad_context_or_concurrency(context, concurrency):
    with pytest.raises(PlanInputError, match="at least 1"):
        kv_cache_bytes(LLAMA_70B, context, concurrency)


def test_unknown_kv_type():
    with pytest.raises(PlanInputError, match="unknown KV-cache type 'fp2'"):
        kv_bytes_per_token(LLAMA_70B, "fp2")


def test_model_spec_rejects_bad_numbers_clearly():
    with pytest.raises(PlanInputError, match=r"params: Input should be greater than 0 \(got -1"):
        ModelSpec.build(params=-1, quant="bf16")
    with pytest.raises(PlanInputError, match="layers"):
        ModelSpec.build(params=1e9, quant="bf16", layers=0)
    with pytest.raises(PlanInputError, match="active_params .* exceeds params"):
        ModelSpec.build(params=1e9, quant="bf16", active_params=2e9)
    with pytest.raises(UnknownQuantError, match="unknown quantisation 'q9'"):
        ModelSpec.build(params=1e9, quant="q9")
