"""Bytes per parameter of each quantisation, scales included.

A quantised weight costs its packed values plus the scales that decode them.
Block formats store one scale (sometimes a minimum too) per block of values,
so the cost per parameter is ``block_bytes / block_values``. Per-tensor or
per-channel scales (a few bytes per tensor or per row of thousands of values)
are below 0.05 % and left out.

The GGUF block layouts are ggml's (``ggml-common.h``, the ``block_*``
structs); the tests check every figure here against the block sizes the
``gguf`` package ships (``gguf.GGML_QUANT_SIZES``).

``compute`` names the tensor-core precision prefill runs at with these
weights; ``bounds`` maps it to a peak TFLOP/s.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparksync.core.planner.errors import UnknownQuantError


@dataclass(frozen=True)
class Quant:
    name: str
    bytes_per_param: float
    compute: str  # "fp4", "fp8", "int8", "bf16" or "fp32"
    layout: str  # where the bytes come from, for --help and the docs


def _block(values: int, block_bytes: int) -> float:
    return block_bytes / values


# Parameters of Meta-Llama-3-8B: llama.cpp's quantize tool states its mixture
# sizes on this model (tools/quantize/quantize.cpp, the QUANT_OPTIONS help
# table, "4.58G ... @ Llama-3-8B", in GiB).
_LLAMA3_8B_PARAMS = 8_030_261_248


def _llama3_8b_mix(gib: float) -> float:
    return gib * 2**30 / _LLAMA3_8B_PARAMS


_QUANTS = [
    # --- floating point, no scales --------------------------------------
    Quant("fp32", 4.0, "fp32", "32-bit floats"),
    Quant("bf16", 2.0, "bf16", "16-bit brain floats"),
    Quant("fp16", 2.0, "bf16", "16-bit IEEE floats (tensor cores run them at the BF16 rate)"),
    # FP8 E4M3 checkpoints keep one FP32 scale per tensor, or per 128x128
    # block (4 B per 16,384 values, 0.02 %): both negligible.
    Quant("fp8", 1.0, "fp8", "8-bit floats (E4M3) + per-tensor or per-block scales (negligible)"),
    Quant("int8", 1.0, "int8", "8-bit integers + per-channel scales (negligible)"),
    # --- 4-bit floating point with block scales --------------------------
    # NVFP4: 16 E2M1 values (8 B) share one FP8 E4M3 scale (1 B) -> 9 B / 16;
    # the extra FP32 scale per tensor is negligible.
    Quant("nvfp4", _block(16, 8 + 1), "fp4", "4-bit E2M1 + one FP8 scale per 16 values + FP32 per tensor"),
    # MXFP4 (OCP Microscaling): 32 E2M1 values (16 B) share one E8M0 scale (1 B).
    Quant("mxfp4", _block(32, 16 + 1), "fp4", "4-bit E2M1 + one E8M0 scale per 32 values"),
    # GPTQ/AWQ INT4, group size 128: per group an FP16 scale (2 B) and a 4-bit
    # zero point (0.5 B). The matmul dequantises to BF16.
    Quant("int4", 0.5 + (2 + 0.5) / 128, "bf16", "4-bit integers + FP16 scale and 4-bit zero per 128"),
    # --- GGUF tensor types: (values per block, bytes per block) -------------
    # block_q4_0: fp16 d + 32 x 4-bit                      -> 2 + 16 = 18 B / 32
    Quant("q4_0", _block(32, 18), "int8", "GGUF Q4_0: 32 x 4 bit + FP16 scale"),
    # block_q4_1: fp16 d + fp16 m + 32 x 4-bit             -> 2 + 2 + 16 = 20 B / 32
    Quant("q4_1", _block(32, 20), "int8", "GGUF Q4_1: 32 x 4 bit + FP16 scale and min"),
    # block_q5_0: fp16 d + 4 B high bits + 32 x 4-bit low  -> 2 + 4 + 16 = 22 B / 32
    Quant("q5_0", _block(32, 22), "int8", "GGUF Q5_0: 32 x 5 bit + FP16 scale"),
    # block_q5_1: fp16 d, m + 4 B high bits + 16 B low     -> 2 + 2 + 4 + 16 = 24 B / 32
    Quant("q5_1", _block(32, 24), "int8", "GGUF Q5_1: 32 x 5 bit + FP16 scale and min"),
    # block_q8_0: fp16 d + 32 x int8                       -> 2 + 32 = 34 B / 32
    Quant("q8_0", _block(32, 34), "int8", "GGUF Q8_0: 32 x 8 bit + FP16 scale"),
    # K-quants: super-blocks of 256 values in sub-blocks of 16 or 32.
    # block_q2_K: 16 B 4-bit scales/mins + 64 B 2-bit + fp16 d, dmin -> 84 B / 256
    Quant("q2_k", _block(256, 84), "int8", "GGUF Q2_K: 256 x 2 bit + 4-bit sub-block scales"),
    # block_q3_K: 32 B high bits + 64 B low 2 bits + 12 B 6-bit scales + fp16 d -> 110 B / 256
    Quant("q3_k", _block(256, 110), "int8", "GGUF Q3_K: 256 x 3 bit + 6-bit sub-block scales"),
    # block_q4_K: fp16 d, dmin + 12 B 6-bit scales/mins + 128 B 4-bit -> 144 B / 256
    Quant("q4_k", _block(256, 144), "int8", "GGUF Q4_K: 256 x 4 bit + 6-bit sub-block scales/mins"),
    # block_q5_K: fp16 d, dmin + 12 B scales/mins + 32 B high bits + 128 B low -> 176 B / 256
    Quant("q5_k", _block(256, 176), "int8", "GGUF Q5_K: 256 x 5 bit + 6-bit sub-block scales/mins"),
    # block_q6_K: 128 B low 4 bits + 64 B high 2 bits + 16 B int8 scales + fp16 d -> 210 B / 256
    Quant("q6_k", _block(256, 210), "int8", "GGUF Q6_K: 256 x 6 bit + 8-bit sub-block scales"),
    # block_iq4_nl: fp16 d + 32 x 4-bit non-linear codes   -> 18 B / 32
    Quant("iq4_nl", _block(32, 18), "int8", "GGUF IQ4_NL: 32 x 4-bit codebook + FP16 scale"),
    # block_iq4_xs: fp16 d + 2 B high + 4 B low scale bits + 128 B codes -> 136 B / 256
    Quant("iq4_xs", _block(256, 136), "int8", "GGUF IQ4_XS: 256 x 4-bit codebook + 6-bit scales"),
    # block_iq3_s: fp16 d + 64 B qs + 8 B qh + 32 B signs + 4 B scales -> 110 B / 256
    Quant("iq3_s", _block(256, 110), "int8", "GGUF IQ3_S: 3.44 bits per weight"),
    # block_iq3_xxs: fp16 d + 96 B grid indices, signs and scales -> 98 B / 256
    Quant("iq3_xxs", _block(256, 98), "int8", "GGUF IQ3_XXS: 3.06 bits per weight"),
    # block_iq2_s: fp16 d + 64 B qs and signs + 8 B qh + 8 B scales -> 82 B / 256
    Quant("iq2_s", _block(256, 82), "int8", "GGUF IQ2_S: 2.56 bits per weight"),
    # block_iq2_xs: fp16 d + 64 B grid indices + 8 B scales -> 74 B / 256
    Quant("iq2_xs", _block(256, 74), "int8", "GGUF IQ2_XS: 2.31 bits per weight"),
    # block_iq2_xxs: fp16 d + 64 B grid indices, signs and scales -> 66 B / 256
    Quant("iq2_xxs", _block(256, 66), "int8", "GGUF IQ2_XXS: 2.06 bits per weight"),
    # block_iq1_m: 32 B qs + 16 B qh + 8 B scales (the scale lives in them) -> 56 B / 256
    Quant("iq1_m", _block(256, 56), "int8", "GGUF IQ1_M: 1.75 bits per weight"),
    # block_iq1_s: fp16 d + 32 B qs + 16 B qh -> 50 B / 256
    Quant("iq1_s", _block(256, 50), "int8", "GGUF IQ1_S: 1.56 bits per weight"),
    # block_tq2_0: 64 B of 2-bit ternary values + fp16 d -> 66 B / 256
    Quant("tq2_0", _block(256, 66), "int8", "GGUF TQ2_0: ternary, 2.06 bits per weight"),
    # block_tq1_0: 48 B base-3 packed + 4 B + fp16 d -> 54 B / 256
    Quant("tq1_0", _block(256, 54), "int8", "GGUF TQ1_0: ternary, 1.69 bits per weight"),
    # block_q1_0: 16 B of sign bits + fp16 d -> 18 B / 128
    Quant("q1_0", _block(128, 18), "int8", "GGUF Q1_0: 128 x 1 bit + FP16 scale"),
    # --- GGUF file types: mixtures ----------------------------------------
    # A "_S/_M/_L" file keeps some tensors (attn_v, ffn_down, output) at a
    # higher type, so its cost per parameter is measured, not derived:
    # llama.cpp's own sizes on Llama-3-8B. A real GGUF is read exactly.
    Quant("q3_k_s", _llama3_8b_mix(3.41), "int8", "GGUF Q3_K_S mixture (3.41 GiB on Llama-3-8B)"),
    Quant("q3_k_m", _llama3_8b_mix(3.74), "int8", "GGUF Q3_K_M mixture (3.74 GiB on Llama-3-8B)"),
    Quant("q3_k_l", _llama3_8b_mix(4.03), "int8", "GGUF Q3_K_L mixture (4.03 GiB on Llama-3-8B)"),
    Quant("q4_k_s", _llama3_8b_mix(4.37), "int8", "GGUF Q4_K_S mixture (4.37 GiB on Llama-3-8B)"),
    Quant("q4_k_m", _llama3_8b_mix(4.58), "int8", "GGUF Q4_K_M mixture (4.58 GiB on Llama-3-8B)"),
    Quant("q5_k_s", _llama3_8b_mix(5.21), "int8", "GGUF Q5_K_S mixture (5.21 GiB on Llama-3-8B)"),
    Quant("q5_k_m", _llama3_8b_mix(5.33), "int8", "GGUF Q5_K_M mixture (5.33 GiB on Llama-3-8B)"),
]

QUANTS: dict[str, Quant] = {q.name: q for q in _QUANTS}

_ALIASES = {
    "f32": "fp32",
    "float32": "fp32",
    "bfloat16": "bf16",
    "f16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "f8": "fp8",
    "fp8_e4m3": "fp8",
    "f8_e4m3": "fp8",
    "e4m3": "fp8",
    "i8": "int8",
    "w8a8": "int8",
    "gptq": "int4",
    "awq": "int4",
    "w4a16": "int4",
    "nvfp4_a16": "nvfp4",
    "mxfp4_moe": "mxfp4",
}


def normalise(name: str) -> str:
    """Lower case, '-' and ' ' as '_': "Q4_K_M", "q4-k-m" and "nvFP4" all match."""
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    return _ALIASES.get(key, key)


def quant_for(name: str) -> Quant:
    """The named quantisation, or an error that lists the known names."""
    quant = QUANTS.get(normalise(name))
    if quant is None:
        raise UnknownQuantError(
            f"unknown quantisation {name!r}. Use one of: {', '.join(QUANTS)}; "
            "or give the model file (--model-file) so its exact size is read."
        )
    return quant


def bits_per_weight(name: str) -> float:
    return quant_for(name).bytes_per_param * 8
