"""The figures NVIDIA published on 2026-10-22 (FACTS.md), shown beside a user's own.

Inference: Qwen3.8-27B-NVFP4 with llama-benchy, concurrency 1, pp 8192,
tg 256, no speculative decoding. Training: nanochat pretraining, ~896.5 M
parameters, 524,288-token global batch.
"""

from __future__ import annotations

INFERENCE_MODEL = "Qwen3.8-27B-NVFP4"
DECODE_TPS = {1: 11.86, 8: 52.58}  # 8 nodes: switch + RoCEnante
DECODE_SCALING_8 = 4.43
PREFILL_SCALING_8 = 1.94
NCCL_DECODE_SCALING_8 = 3.05  # switch without RoCEnante
RING_DECODE_TPS_8 = 40.11  # physical ring, no switch

TRAINING_TPS = {1: 8740.0, 8: 68079.0}  # the 1-node figure is "about 8,740"
TRAINING_SPEEDUP_8 = 7.79
TRAINING_EFFICIENCY_8 = 0.974


def inference_reference() -> str:
    return (f"Published ({INFERENCE_MODEL}, same profile): decode {DECODE_TPS[1]} tok/s on 1 node, "
            f"{DECODE_TPS[8]} on 8 (switch + RoCEnante): {DECODE_SCALING_8}x decode, "
            f"{PREFILL_SCALING_8}x prefill; NCCL {NCCL_DECODE_SCALING_8}x; ring {RING_DECODE_TPS_8} tok/s.")


def training_reference() -> str:
    return (f"Published (nanochat, ~896.5 M parameters): {TRAINING_TPS[8]:,.0f} tok/s on 8 nodes, "
            f"{TRAINING_SPEEDUP_8}x one node (about {TRAINING_TPS[1]:,.0f}), "
            f"efficiency {TRAINING_EFFICIENCY_8:.1%}.")
