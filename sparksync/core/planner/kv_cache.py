"""KV-cache size: what each token of context costs, per model and per node.

Standard attention caches a key and a value vector per KV head per layer:

    bytes per token = kv_layers x kv_heads x head_dim x 2 (K and V) x bytes per value

Multi-head latent attention (DeepSeek-V2/V3, GLM-5) caches one compressed
latent per layer instead: ``kv_layers x mla_kv_dim x bytes``. Hybrid models
(linear-attention layers mixed with full attention) cache only their full
attention layers (``kv_layers``); their small fixed recurrent state is left
out. Sliding-window layers are counted at full context, which overestimates:
safe for a fit.
"""

from __future__ import annotations

import math

from sparksync.core.planner.errors import PlanInputError
from sparksync.core.planner.model import ModelSpec
from sparksync.core.planner.quant import normalise

# Bytes per cached value. llama.cpp can also quantise its cache (q8_0, q4_0):
# the same block layouts as the weights (34 B and 18 B per 32 values).
KV_DTYPES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "q8_0": 34 / 32,
    "q4_0": 18 / 32,
}


def kv_value_bytes(kv_dtype: str) -> float:
    value = KV_DTYPES.get(normalise(kv_dtype))
    if value is None:
        raise PlanInputError(f"unknown KV-cache type {kv_dtype!r}. Use one of: {', '.join(KV_DTYPES)}.")
    return value


def require_kv_shape(model: ModelSpec) -> None:
    if not model.has_kv_shape:
        raise PlanInputError(
            "the KV cache needs the model's shape: give --layers, --kv-heads and --head-dim "
            "(or --model-file to read them from the model)."
        )


def kv_values_per_token(model: ModelSpec) -> int:
    """Cached values per token of context, all layers together."""
    require_kv_shape(model)
    layers, heads, head_dim = model.cache_layers, model.kv_heads, model.head_dim
    assert layers is not None, "require_kv_shape checked it"
    if model.mla_kv_dim is not None:
        return layers * model.mla_kv_dim
    assert heads is not None and head_dim is not None, "require_kv_shape checked them"
    return layers * heads * head_dim * 2


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str = "bf16") -> float:
    return kv_values_per_token(model) * kv_value_bytes(kv_dtype)


def kv_cache_bytes(model: ModelSpec, context: int, concurrency: int = 1, kv_dtype: str = "bf16") -> float:
    """The whole cache: ``context`` tokens for each of ``concurrency`` sequences."""
    _check_positive(context=context, concurrency=concurrency)
    return kv_bytes_per_token(model, kv_dtype) * context * concurrency


def node_kv_share(model: ModelSpec, nodes: int) -> float:
    """Fraction of the cache each of ``nodes`` tensor-parallel ranks holds.

    KV heads are split across ranks; with more ranks than KV heads each rank
    still holds one head (engines replicate them), so the share stops falling
    at 1 / kv_heads. An MLA latent is shared by all heads, so every rank
    holds all of it.
    """
    _check_positive(nodes=nodes)
    require_kv_shape(model)
    if model.mla_kv_dim is not None:
        return 1.0
    heads = model.kv_heads
    assert heads is not None, "require_kv_shape checked it"
    return math.ceil(heads / nodes) / heads


def kv_cache_bytes_per_node(
    model: ModelSpec, nodes: int, context: int, concurrency: int = 1, kv_dtype: str = "bf16"
) -> float:
    return kv_cache_bytes(model, context, concurrency, kv_dtype) * node_kv_share(model, nodes)


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if value < 1:
            raise PlanInputError(f"{name} must be at least 1 (got {value}).")
