"""Read a model's numbers from its local files: a GGUF, or safetensors + config.json.

Both read headers only; no weight is loaded (the files are memory-mapped and
only their headers touched), so a 470 GB checkpoint reads in moments. The
weight bytes are exact: the sum of the tensors' sizes, scales included.

- GGUF: the ``gguf`` package's reader (metadata keys ``<arch>.block_count``,
  ``<arch>.attention.head_count_kv`` ...). Split files
  (``name-00001-of-00003.gguf``) are read together.
- safetensors: ``config.json`` for the shape and quantisation, and each
  shard's JSON header for tensor sizes. The header is read with the ``gguf``
  package's ``SafetensorsLocal``, which parses it without torch or the
  ``safetensors`` library. Shards that are not there yet fall back on the
  index's ``metadata.total_size``.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any, NamedTuple

from sparksync.core.planner.errors import ModelFileError
from sparksync.core.planner.model import ModelSpec
from sparksync.core.planner.quant import QUANTS, normalise

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
SAFETENSORS_INDEX = "model.safetensors.index.json"
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")


def read_model(path: Path | str) -> ModelSpec:
    """The ModelSpec of the model at ``path``: a .gguf file, or a folder (or any file
    in it) holding config.json and the safetensors index or shards."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ModelFileError(f"no model file at {path}. Check the path.")
    if path.is_file() and _starts_with(path, GGUF_MAGIC):
        return read_gguf(path)
    folder = path if path.is_dir() else path.parent
    if path.is_dir() and not (folder / "config.json").is_file():
        return read_gguf(_only_gguf(folder))
    if (folder / "config.json").is_file() and (path.is_dir() or _is_safetensors_part(path)):
        return read_safetensors(folder)
    raise ModelFileError(
        f"{path} is neither a GGUF file (it does not start with 'GGUF') nor a safetensors model "
        "(a folder with config.json and model.safetensors or its index). Give one of those."
    )


def _only_gguf(folder: Path) -> Path:
    """The one GGUF model in a folder (the first part of a split one)."""
    models = sorted(
        p
        for p in folder.glob("*.gguf")
        if _starts_with(p, GGUF_MAGIC) and (_SPLIT.search(p.name) is None or "-00001-of-" in p.name)
    )
    if len(models) == 1:
        return models[0]
    found = ", ".join(p.name for p in models) if models else "no GGUF file and no config.json"
    raise ModelFileError(f"{folder} holds {found}. Give the model file itself (or a safetensors folder).")


def _starts_with(path: Path, magic: bytes) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(len(magic)) == magic
    except OSError as exc:
        raise ModelFileError(f"cannot read {path}: {exc.strerror}. Check its permissions.") from None


def _is_safetensors_part(path: Path) -> bool:
    return path.name == "config.json" or path.name.endswith((".safetensors", ".safetensors.index.json"))


# --- GGUF ---------------------------------------------------------------------


def read_gguf(path: Path) -> ModelSpec:
    readers = [_gguf_reader(p) for p in _gguf_shards(path)]
    meta = _GgufMeta(readers[0])
    tensors = [t for r in readers for t in r.tensors]
    params = sum(int(t.n_elements) for t in tensors)
    expert_elements = sum(int(t.n_elements) for t in tensors if "_exps" in t.name)
    return ModelSpec.build(
        name=meta.text("general.name") or path.stem,
        params=params,
        quant=_gguf_quant(meta, tensors),
        weight_bytes=sum(int(t.n_bytes) for t in tensors),
        active_params=_active(
            params, expert_elements, meta.arch("expert_count"), meta.arch("expert_used_count")
        ),
        source=str(path),
        **_gguf_shape(meta),
    )


def _gguf_reader(path: Path):
    try:
        import gguf
    except ImportError:  # pragma: no cover - gguf is a dependency; this guards a broken install
        raise ModelFileError("reading GGUF files needs the 'gguf' package: pip install gguf") from None
    try:
        return gguf.GGUFReader(str(path))
    except (ValueError, IndexError, KeyError, TypeError, OSError) as exc:
        raise ModelFileError(f"{path} is not a readable GGUF file ({exc}). Is it complete?") from None


def _gguf_shards(path: Path) -> list[Path]:
    """All parts of a split GGUF (llama.cpp's gguf-split naming), else the one file."""
    match = _SPLIT.search(path.name)
    if match is None:
        return [path]
    count = int(match.group(2))
    stem = path.name[: match.start()]
    shards = [path.with_name(f"{stem}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]
    missing = [s.name for s in shards if not s.is_file()]
    if missing:
        raise ModelFileError(
            f"split GGUF {path.name} is missing parts: {', '.join(missing)}. Copy them beside it."
        )
    return shards


class _GgufMeta:
    def __init__(self, reader) -> None:
        self.reader = reader
        self.architecture = self.text("general.architecture") or "llama"

    def value(self, key: str) -> Any:
        field = self.reader.get_field(key)
        return None if field is None else field.contents()

    def text(self, key: str) -> str | None:
        value = self.value(key)
        return value if isinstance(value, str) else None

    def arch(self, key: str) -> Any:
        return self.value(f"{self.architecture}.{key}")

    def count(self, key: str) -> int | None:
        """Length of an array field without decoding its items (150k token strings)."""
        field = self.reader.get_field(key)
        return None if field is None else len(field.data)


def _gguf_shape(meta: _GgufMeta) -> dict[str, Any]:
    layers, hidden = meta.arch("block_count"), meta.arch("embedding_length")
    heads = _largest(meta.arch("attention.head_count"))
    kv_per_layer = meta.arch("attention.head_count_kv")
    head_dim = meta.arch("attention.key_length") or (hidden // heads if hidden and heads else None)
    shape = {
        "layers": layers,
        "hidden": hidden,
        "attention_heads": heads,
        "head_dim": head_dim,
        "kv_heads": _largest(kv_per_layer) or heads,
        "kv_layers": _kv_layers(meta, layers, kv_per_layer),
        "vocab": meta.arch("vocab_size") or meta.count("tokenizer.ggml.tokens"),
        "max_context": meta.arch("context_length"),
    }
    lora_rank = meta.arch("attention.kv_lora_rank")
    if lora_rank:  # MLA caches the latent plus the decoupled RoPE key
        shape["mla_kv_dim"] = lora_rank + (meta.arch("rope.dimension_count") or 0)
    return {k: v for k, v in shape.items() if v}


def _kv_layers(meta: _GgufMeta, layers: int | None, kv_per_layer: Any) -> int | None:
    """Layers with a KV cache: per-layer head counts of 0 mark recurrent layers."""
    if isinstance(kv_per_layer, list):
        return sum(1 for n in kv_per_layer if n) or None
    interval = meta.arch("full_attention_interval")
    if interval and layers:
        return layers // interval
    return None


def _largest(value: Any) -> int | None:
    if isinstance(value, list):
        return max(value, default=None) or None
    return value


def _gguf_quant(meta: _GgufMeta, tensors: list) -> str:
    """The file type's name when the planner knows it, else the type holding most weights."""
    file_type = meta.value("general.file_type")
    if file_type is not None:
        import gguf

        try:
            name = normalise(gguf.LlamaFileType(file_type).name.removeprefix("MOSTLY_"))
        except ValueError:
            name = ""
        name = {"all_f32": "fp32"}.get(name, name)
        if name in QUANTS:
            return name
    by_type: dict[str, int] = {}
    for tensor in tensors:
        by_type[tensor.tensor_type.name] = by_type.get(tensor.tensor_type.name, 0) + int(tensor.n_elements)
    for type_name in sorted(by_type, key=by_type.__getitem__, reverse=True):
        if normalise(type_name) in QUANTS:
            return normalise(type_name)
    return "bf16"  # unreachable for real files; the exact weight_bytes decide the fit anyway


def _active(params: int, expert_elements: int, experts: Any, used: Any) -> int | None:
    """Parameters per token of an MoE: the routed experts count ``used / experts``."""
    if not experts or not used or not expert_elements:
        return None
    return int(params - expert_elements * (1 - used / experts))


# --- safetensors + config.json ---------------------------------------------------


def read_safetensors(folder: Path) -> ModelSpec:
    config = _text_config(_read_json(folder / "config.json"))
    quant = _hf_quant(folder, config)
    sizes = _tensor_sizes(folder, quant)
    heads = config.get("num_attention_heads")
    hidden = config.get("hidden_size")
    experts = _first(config, "n_routed_experts", "num_local_experts", "num_experts")
    return ModelSpec.build(
        name=config.get("_name_or_path") or folder.name,
        params=sizes.params,
        quant=quant,
        weight_bytes=sizes.weight_bytes,
        active_params=_active(sizes.params, sizes.expert_params, experts, config.get("num_experts_per_tok")),
        source=str(folder),
        **_hf_shape(config, heads, hidden),
    )


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ModelFileError(f"{path.name} is missing from {path.parent}; a safetensors model needs it.")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFileError(f"{path} is not valid JSON ({exc}). Is the download complete?") from None
    if not isinstance(data, dict):
        raise ModelFileError(f"{path} holds no JSON object. Is it the model's own file?")
    return data


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """Multimodal models keep the language model's numbers under text_config."""
    text = config.get("text_config")
    if isinstance(text, dict) and "num_hidden_layers" in text:
        return {
            **text,
            "quantization_config": config.get("quantization_config"),
            "torch_dtype": text.get("torch_dtype") or config.get("torch_dtype"),
        }
    return config


def _first(config: dict[str, Any], *keys: str) -> Any:
    return next((config[k] for k in keys if config.get(k)), None)


def _hf_shape(config: dict[str, Any], heads: int | None, hidden: int | None) -> dict[str, Any]:
    layers = _first(config, "num_hidden_layers", "n_layer", "num_layers")
    shape = {
        "layers": layers,
        "hidden": hidden,
        "attention_heads": heads,
        "kv_heads": config.get("num_key_value_heads") or heads,
        "head_dim": config.get("head_dim") or (hidden // heads if hidden and heads else None),
        "kv_layers": _hf_kv_layers(config, layers),
        "vocab": config.get("vocab_size"),
        "max_context": config.get("max_position_embeddings"),
    }
    if config.get("kv_lora_rank"):  # MLA (DeepSeek-V3, GLM-5): latent + decoupled RoPE key
        shape["mla_kv_dim"] = config["kv_lora_rank"] + (config.get("qk_rope_head_dim") or 0)
    return {k: v for k, v in shape.items() if v}


def _hf_kv_layers(config: dict[str, Any], layers: int | None) -> int | None:
    types = config.get("layer_types")
    if isinstance(types, list) and types:
        full = sum(1 for t in types if t in ("full_attention", "attention"))
        return full or None
    interval = config.get("full_attention_interval")
    return layers // interval if interval and layers else None


def _hf_quant(folder: Path, config: dict[str, Any]) -> str:
    """The checkpoint's quantisation from its quantization_config (or ModelOpt's
    hf_quant_config.json), else its dtype."""
    qc = dict(config.get("quantization_config") or {})
    extra = folder / "hf_quant_config.json"
    if not qc and extra.is_file():
        qc = dict(_read_json(extra).get("quantization") or {})
    text = json.dumps(qc).lower()
    for needle, quant in _QUANT_HINTS:
        if needle in text:
            return quant
    dtype = normalise(str(config.get("torch_dtype") or config.get("dtype") or "bfloat16"))
    return dtype if dtype in QUANTS else "bf16"


# Checked in order on the quantization config's JSON text: ModelOpt ("quant_algo":
# "NVFP4"/"FP8"), compressed-tensors ("format": "nvfp4-pack-quantized",
# "float-quantized", "int-quantized", "pack-quantized"), and the quant_method
# of gpt-oss (mxfp4), FP8, GPTQ and AWQ checkpoints.
_QUANT_HINTS = [
    ("nvfp4", "nvfp4"),
    ("mxfp4", "mxfp4"),
    ("float-quantized", "fp8"),
    ("int-quantized", "int8"),
    ("pack-quantized", "int4"),
    ("gptq", "int4"),
    ("awq", "int4"),
    ("fp8", "fp8"),  # last: an NVFP4 or INT4 config may name an FP8 KV cache
]


class _Sizes(NamedTuple):
    params: int
    weight_bytes: int
    expert_params: int


def _tensor_sizes(folder: Path, quant: str) -> _Sizes:
    shards, total_size = _shards(folder)
    present = [s for s in shards if s.is_file()]
    if present and len(present) == len(shards):
        return _sizes_from_headers(present, quant)
    if total_size:
        log.info(
            "%d of %d shards missing in %s: using the index's total_size",
            len(shards) - len(present),
            len(shards),
            folder,
        )
        return _Sizes(int(total_size / QUANTS[quant].bytes_per_param), int(total_size), 0)
    raise ModelFileError(
        f"no weights to measure in {folder}: neither the .safetensors shards nor an index with "
        "metadata.total_size. Download the index or the shards."
    )


def _shards(folder: Path) -> tuple[list[Path], int | None]:
    index = folder / SAFETENSORS_INDEX
    if index.is_file():
        data = _read_json(index)
        files = sorted(set((data.get("weight_map") or {}).values()))
        return [folder / f for f in files], (data.get("metadata") or {}).get("total_size")
    return sorted(folder.glob("*.safetensors")), None


def _sizes_from_headers(shards: list[Path], quant: str) -> _Sizes:
    params = weight_bytes = expert_params = 0
    packed = 2 if quant in ("nvfp4", "mxfp4") else 1  # two 4-bit values per stored byte
    for shard in shards:
        for name, tensor in _header(shard).items():
            weight_bytes += tensor.data_range.size
            count = _values(name, tensor, packed)
            params += count
            expert_params += count if ".experts." in name else 0
    return _Sizes(params, weight_bytes, expert_params)


def _values(name: str, tensor, packed: int) -> int:
    """Parameters a tensor holds: scales are not parameters; packed ints hold several."""
    leaf = name.rsplit(".", 1)[-1]
    if "scale" in leaf or leaf in ("qzeros", "g_idx"):
        return 0
    elements = 1
    for dim in tensor.shape:
        elements *= dim
    if leaf == "qweight":  # GPTQ/AWQ: eight 4-bit values per int32
        return elements * 8
    return elements * packed if tensor.dtype == "U8" else elements


def _header(shard: Path) -> dict:
    from gguf.utility import SafetensorsLocal

    try:
        with SafetensorsLocal(shard) as tensors:
            return tensors
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, OSError) as exc:
        raise ModelFileError(f"{shard} is not a readable safetensors file ({exc}). Is it complete?") from None
