"""Reading a model's numbers from real files written here: GGUF and safetensors.

GGUFs are written with the gguf package (the tiny llama models the engine
tests serve, and a Q8_0 mixture of experts). Safetensors files are written
byte by byte from the format's definition: an 8-byte little-endian header
length, the JSON header, then the tensor data.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import gguf
import numpy as np
import pytest

from sparksync.core.planner.errors import ModelFileError
from sparksync.core.planner.readers import read_model
from tests.engines.tinymodel import LARGE, SMALL, layer_tensor_bytes, write_tiny_model

# --- GGUF ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny")
    return {spec.name: write_tiny_model(directory / spec.name, spec) for spec in (SMALL, LARGE)}


@pytest.mark.parametrize("spec", [SMALL, LARGE], ids=lambda s: s.name)
def test_tiny_llama_gguf(tiny_models, spec):
    model = read_model(tiny_models[spec.name].gguf)
    vocab = 1024  # the tiny models' trained vocabulary
    # Parameters: the repeating blocks (layer_tensor_bytes / 4 bytes per F32) plus token
    # embeddings and output head (vocab x n_embd each) and the final norm (n_embd).
    params = layer_tensor_bytes(spec) // 4 + 2 * vocab * spec.n_embd + spec.n_embd
    assert model.params == params
    assert model.weight_bytes == 4 * params and model.quant == "fp32"  # ALL_F32: 4 B each
    assert (model.layers, model.hidden, model.attention_heads) == (spec.n_layer, spec.n_embd, spec.n_head)
    assert model.kv_heads == spec.n_head_kv and model.head_dim == spec.n_embd // spec.n_head
    assert (model.vocab, model.max_context, model.name) == (vocab, spec.n_ctx, spec.name)
    assert model.active_params is None


def test_gguf_size_matches_the_file_on_disk(tiny_models):
    # The weights are nearly all of a GGUF: the file is the tensors plus a small header.
    path = tiny_models[LARGE.name].gguf
    model = read_model(path)
    assert 0 < path.stat().st_size - model.weight_bytes < 100_000


def test_a_folder_with_one_gguf_reads_it(tiny_models):
    path = tiny_models[SMALL.name].gguf
    assert read_model(path.parent).params == read_model(path).params


def _moe_writer(path: Path, blocks: int, tensors: bool = True) -> gguf.GGUFWriter:
    writer = gguf.GGUFWriter(str(path), "qwen3moe")
    writer.add_name("tiny-moe")
    writer.add_block_count(blocks)
    writer.add_embedding_length(64)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_key_length(16)
    writer.add_context_length(2048)
    writer.add_expert_count(8)
    writer.add_expert_used_count(2)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    return writer


def _q8(rng, *shape):
    return gguf.quants.quantize(rng.normal(size=shape).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)


def _add_block(writer, rng, i: int) -> None:
    writer.add_tensor(f"blk.{i}.attn_q.weight", _q8(rng, 64, 64), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor(
        f"blk.{i}.ffn_up_exps.weight", _q8(rng, 8, 128, 64), raw_dtype=gguf.GGMLQuantizationType.Q8_0
    )


def _flush(writer) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_q8_0_mixture_of_experts_gguf(tmp_path):
    rng = np.random.default_rng(0)
    writer = _moe_writer(tmp_path / "moe.gguf", blocks=2)
    for i in range(2):
        _add_block(writer, rng, i)
    _flush(writer)
    model = read_model(tmp_path / "moe.gguf")
    # Per block: attn_q 64 x 64 = 4,096 plus 8 experts x 128 x 64 = 65,536; two blocks.
    assert model.params == 2 * (4096 + 65536)
    # All Q8_0: 34 bytes per 32 values.
    assert model.weight_bytes == model.params * 34 // 32 and model.quant == "q8_0"
    # 2 of 8 experts per token: the expert weights count 1/4 -> 2 x (4,096 + 16,384).
    assert model.active_params == 2 * (4096 + 65536 // 4)
    assert (model.layers, model.kv_heads, model.head_dim, model.max_context) == (2, 2, 16, 2048)


def test_split_gguf_reads_every_part(tmp_path):
    rng = np.random.default_rng(1)
    first = _moe_writer(tmp_path / "big-00001-of-00002.gguf", blocks=2)
    _add_block(first, rng, 0)
    _flush(first)
    second = gguf.GGUFWriter(str(tmp_path / "big-00002-of-00002.gguf"), "qwen3moe")
    _add_block(second, rng, 1)
    _flush(second)
    model = read_model(tmp_path / "big-00001-of-00002.gguf")
    assert model.params == 2 * (4096 + 65536)  # both parts' tensors
    assert read_model(tmp_path).params == model.params  # the folder: its one (split) model
    (tmp_path / "big-00002-of-00002.gguf").unlink()
    with pytest.raises(ModelFileError, match="missing parts: big-00002-of-00002.gguf"):
        read_model(tmp_path / "big-00001-of-00002.gguf")


# --- safetensors + config.json ------------------------------------------------------

DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "U8": 1, "F8_E4M3": 1, "I32": 4}


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> int:
    """A valid safetensors file of zero-filled tensors; returns the bytes of tensor data."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, (dtype, shape) in tensors.items():
        size = DTYPE_BYTES[dtype] * int(np.prod(shape, dtype=np.int64))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)  # the format pads the header to 8 bytes with spaces
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))
    return offset


def write_config(folder: Path, **overrides) -> None:
    config = {
        "architectures": ["LlamaForCausalLM"],
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 128,
        "max_position_embeddings": 2048,
        "torch_dtype": "bfloat16",
        **overrides,
    }
    (folder / "config.json").write_text(json.dumps(config))


def llama_tensors(dtype: str = "BF16") -> dict[str, tuple[str, list[int]]]:
    tensors = {
        "model.embed_tokens.weight": (dtype, [128, 64]),
        "lm_head.weight": (dtype, [128, 64]),
        "model.norm.weight": (dtype, [64]),
    }
    for i in range(2):
        p = f"model.layers.{i}"
        tensors |= {
            f"{p}.self_attn.q_proj.weight": (dtype, [64, 64]),
            f"{p}.self_attn.k_proj.weight": (dtype, [32, 64]),
            f"{p}.self_attn.v_proj.weight": (dtype, [32, 64]),
            f"{p}.self_attn.o_proj.weight": (dtype, [64, 64]),
            f"{p}.mlp.up_proj.weight": (dtype, [128, 64]),
        }
    return tensors


# 2 x 128 x 64 (embeddings, head) + 64 (norm) + 2 layers x (64x64 + 2 x 32x64 + 64x64 + 128x64)
LLAMA_PARAMS = 2 * 128 * 64 + 64 + 2 * (4096 + 2 * 2048 + 4096 + 8192)


def test_sharded_bf16_checkpoint(tmp_path):
    write_config(tmp_path)
    tensors = list(llama_tensors().items())
    halves = {
        "model-00001-of-00002.safetensors": dict(tensors[:5]),
        "model-00002-of-00002.safetensors": dict(tensors[5:]),
    }
    total = sum(write_safetensors(tmp_path / name, part) for name, part in halves.items())
    weight_map = {t: name for name, part in halves.items() for t in part}
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})
    )
    model = read_model(tmp_path / "model.safetensors.index.json")
    assert model.params == LLAMA_PARAMS and model.weight_bytes == 2 * LLAMA_PARAMS == total
    assert model.quant == "bf16"
    # head_dim = hidden / heads = 64 / 4; KV heads from num_key_value_heads.
    assert (model.layers, model.kv_heads, model.head_dim, model.vocab, model.max_context) == (
        2,
        2,
        16,
        128,
        2048,
    )


def test_nvfp4_checkpoint_costs_what_the_quant_table_says(tmp_path):
    # ModelOpt NVFP4 layout for one 64 x 64 linear: weight U8 [64, 32] (two 4-bit values a
    # byte), weight_scale F8_E4M3 [64, 4] (one per 16 values), weight_scale_2 and input_scale
    # F32 scalars. Bytes: 2,048 + 256 + 4 + 4 = 2,312 for 4,096 parameters.
    write_config(
        tmp_path,
        num_hidden_layers=1,
        quantization_config={"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"},
    )
    p = "model.layers.0.self_attn.q_proj"
    write_safetensors(
        tmp_path / "model.safetensors",
        {
            f"{p}.weight": ("U8", [64, 32]),
            f"{p}.weight_scale": ("F8_E4M3", [64, 4]),
            f"{p}.weight_scale_2": ("F32", []),
            f"{p}.input_scale": ("F32", []),
        },
    )
    model = read_model(tmp_path)
    assert model.quant == "nvfp4"  # not fp8, which only the KV cache uses
    assert model.params == 4096 and model.weight_bytes == 2312
    # 2,304 B of values and block scales / 4,096 = 0.5625: NVFP4's entry, exactly.
    assert (model.weight_bytes - 8) / model.params == model.quantisation.bytes_per_param


def test_moe_checkpoint_counts_active_experts(tmp_path):
    # 8 experts of 2 x 128 x 64, 2 used per token, plus a 64 x 64 attention projection.
    write_config(tmp_path, num_hidden_layers=1, num_experts=8, num_experts_per_tok=2)
    tensors = {"model.layers.0.self_attn.q_proj.weight": ("BF16", [64, 64])}
    for e in range(8):
        for proj in ("up_proj", "down_proj"):
            tensors[f"model.layers.0.mlp.experts.{e}.{proj}.weight"] = ("BF16", [128, 64])
    write_safetensors(tmp_path / "model.safetensors", tensors)
    model = read_model(tmp_path / "config.json")
    assert model.params == 4096 + 8 * 2 * 8192
    assert model.active_params == 4096 + 2 * 2 * 8192


def test_index_without_shards_uses_total_size_and_reads_mla_and_hybrid_shape(tmp_path):
    # Only config.json and the index downloaded (shards pending): weights = total_size, and
    # the parameter count is total_size / 1 B (FP8). MLA: latent 512 + RoPE key 64 = 576.
    write_config(
        tmp_path,
        num_hidden_layers=4,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        layer_types=["linear_attention", "full_attention"] * 2,
        quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128]},
    )
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps(
            {"metadata": {"total_size": 5_000_000}, "weight_map": {"a": "model-00001-of-00009.safetensors"}}
        )
    )
    model = read_model(tmp_path)
    assert model.quant == "fp8" and model.weight_bytes == 5_000_000 and model.params == 5_000_000
    assert model.mla_kv_dim == 576 and model.kv_layers == 2


def test_multimodal_config_reads_the_text_model(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["Gemma3ForConditionalGeneration"],
                "torch_dtype": "bfloat16",
                "text_config": {
                    "num_hidden_layers": 2,
                    "hidden_size": 64,
                    "num_attention_heads": 4,
                    "num_key_value_heads": 1,
                    "head_dim": 32,
                    "vocab_size": 128,
                },
            }
        )
    )
    write_safetensors(tmp_path / "model.safetensors", llama_tensors())
    model = read_model(tmp_path)
    assert (model.layers, model.kv_heads, model.head_dim, model.quant) == (2, 1, 32, "bf16")


# --- bad input -------------------------------------------------------------------


def test_a_file_that_is_neither(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not a model")
    with pytest.raises(ModelFileError, match="neither a GGUF file .* nor a safetensors model"):
        read_model(path)


def test_a_truncated_gguf(tmp_path, tiny_models):
    data = tiny_models[SMALL.name].gguf.read_bytes()
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[:200])  # the magic survives, the metadata does not
    with pytest.raises(ModelFileError, match="cut.gguf is not a readable GGUF file"):
        read_model(path)


def test_a_missing_path(tmp_path):
    with pytest.raises(ModelFileError, match="no model file at"):
        read_model(tmp_path / "absent.gguf")


def test_config_without_weights(tmp_path):
    write_config(tmp_path)
    with pytest.raises(ModelFileError, match="no weights to measure"):
        read_model(tmp_path)


def test_config_that_is_not_json(tmp_path):
    (tmp_path / "config.json").write_text("{ broken")
    write_safetensors(tmp_path / "model.safetensors", llama_tensors())
    with pytest.raises(ModelFileError, match="config.json is not valid JSON"):
        read_model(tmp_path)


def test_a_shard_that_is_not_safetensors(tmp_path):
    write_config(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 10**9) + b"{}")
    with pytest.raises(ModelFileError, match="model.safetensors is not a readable safetensors file"):
        read_model(tmp_path)


def test_a_folder_with_several_ggufs(tmp_path, tiny_models):
    for spec in (SMALL, LARGE):
        (tmp_path / f"{spec.name}.gguf").write_bytes(tiny_models[spec.name].gguf.read_bytes())
    with pytest.raises(ModelFileError, match="holds tiny-large.gguf, tiny-small.gguf. Give the model file"):
        read_model(tmp_path)
