"""Bytes per parameter, scales included, against hand-computed block layouts."""

from __future__ import annotations

import gguf
import pytest

from sparksync.core.planner.errors import UnknownQuantError
from sparksync.core.planner.quant import QUANTS, bits_per_weight, quant_for


def test_nvfp4_counts_its_fp8_block_scales():
    # 16 values x 4 bits = 8 bytes, plus one FP8 scale byte per block: 9 / 16 = 0.5625 B,
    # i.e. 4.5 bits per weight, not the 4 bits the name suggests.
    assert quant_for("nvfp4").bytes_per_param == 0.5625
    assert bits_per_weight("NVFP4") == 4.5


def test_mxfp4_has_one_e8m0_scale_per_32_values():
    # 32 values x 4 bits = 16 B + 1 B scale = 17 B per 32 values = 4.25 bits.
    assert quant_for("mxfp4").bytes_per_param == 17 / 32


def test_the_published_27b_model_in_nvfp4_is_15_19_gb():
    # Qwen3.8-27B-NVFP4: 27e9 x 0.5625 = 15.1875e9 bytes (the FP32 per-tensor scales add
    # a few KB, which the planner leaves out).
    assert 27e9 * quant_for("nvfp4").bytes_per_param == 15.1875e9


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("bf16", 2.0),  # 70 B x 2 = 140 GB: the classic "70B needs two 80 GB GPUs"
        ("fp16", 2.0),
        ("fp32", 4.0),
        ("fp8", 1.0),
        ("int8", 1.0),
        # GPTQ/AWQ group 128: 4 bits + 16-bit scale / 128 + 4-bit zero / 128 = 4.15625 bits
        ("int4", 4.15625 / 8),
    ],
)
def test_float_and_integer_formats(name, expected):
    assert quant_for(name).bytes_per_param == pytest.approx(expected)


# Every GGUF tensor type the planner names, against the block sizes ggml itself uses
# (the gguf package's table: values per block, bytes per block).
GGUF_TYPES = [
    "q4_0",
    "q4_1",
    "q5_0",
    "q5_1",
    "q8_0",
    "q2_k",
    "q3_k",
    "q4_k",
    "q5_k",
    "q6_k",
    "iq4_nl",
    "iq4_xs",
    "iq3_s",
    "iq3_xxs",
    "iq2_s",
    "iq2_xs",
    "iq2_xxs",
    "iq1_m",
    "iq1_s",
    "tq1_0",
    "tq2_0",
    "q1_0",
    "mxfp4",
    "bf16",
    "fp16",
    "fp32",
]
GGML_NAMES = {"fp16": "F16", "fp32": "F32"}


@pytest.mark.parametrize("name", GGUF_TYPES)
def test_gguf_block_sizes_match_ggml(name):
    ggml_type = gguf.GGMLQuantizationType[GGML_NAMES.get(name, name.upper())]
    values, block_bytes = gguf.GGML_QUANT_SIZES[ggml_type]
    assert quant_for(name).bytes_per_param == block_bytes / values


def test_gguf_nvfp4_blocks_cost_the_same_as_nvidia_nvfp4():
    # ggml packs 64 values with their 4 FP8 scales: 32 + 4 = 36 B / 64 = 0.5625, the same.
    values, block_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.NVFP4]
    assert block_bytes / values == quant_for("nvfp4").bytes_per_param


def test_hand_computed_k_quant_layouts():
    # Q8_0: FP16 scale + 32 int8 = 34 B per 32 -> 8.5 bits per weight.
    assert bits_per_weight("q8_0") == 8.5
    # Q4_K: FP16 d and dmin (4 B) + 12 B of 6-bit scales + 128 B of nibbles = 144 B / 256 = 4.5 bits.
    assert bits_per_weight("q4_k") == 4.5
    # Q6_K: 128 + 64 + 16 + 2 = 210 B / 256 = 6.5625 bits.
    assert bits_per_weight("q6_k") == 6.5625


def test_mixtures_sit_between_their_base_and_upgrade_types():
    # Q4_K_M keeps most tensors at Q4_K (4.5 bits) and some at Q6_K (6.56 bits), so its
    # measured size must fall between; llama.cpp's 4.58 GiB for Llama-3-8B is 4.90 bits.
    assert bits_per_weight("q4_k") < bits_per_weight("q4_k_m") < bits_per_weight("q6_k")
    assert bits_per_weight("q4_k_m") == pytest.approx(4.90, abs=0.01)
    assert bits_per_weight("q5_k") < bits_per_weight("q5_k_m") < bits_per_weight("q6_k")
    sizes = [
        bits_per_weight(n) for n in ("q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m")
    ]
    assert sizes == sorted(sizes)


@pytest.mark.parametrize(
    ("spelling", "name"),
    [
        ("Q4_K_M", "q4_k_m"),
        ("q4-k-m", "q4_k_m"),
        ("nvFP4", "nvfp4"),
        ("bfloat16", "bf16"),
        ("F16", "fp16"),
        ("float32", "fp32"),
        ("AWQ", "int4"),
        ("MXFP4_MOE", "mxfp4"),
        (" Q8_0 ", "q8_0"),
    ],
)
def test_spellings(spelling, name):
    assert quant_for(spelling).name == name


def test_unknown_quant_names_the_known_ones():
    with pytest.raises(UnknownQuantError) as caught:
        quant_for("q7_z")
    message = str(caught.value)
    assert "'q7_z'" in message and "nvfp4" in message and "q4_k_m" in message and "--model-file" in message


def test_every_quant_has_a_compute_precision_and_a_positive_size():
    for quant in QUANTS.values():
        assert quant.compute in {"fp4", "fp8", "int8", "bf16", "fp32"}
        assert 0 < quant.bytes_per_param <= 4
