"""Models the tests write themselves: a tiny GGUF and a safetensors folder of random shards.

Nothing comes from a hub. The GGUF is the demo writer's (``tiny_model``); the
safetensors shards are real safetensors files (an 8-byte header length, a JSON
header, the tensor bytes) filled with random data, next to a ``config.json``.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from sparksync.core.engines.tiny_model import ModelShape, byte_vocabulary, write_gguf

TINY = ModelShape("tiny", n_embd=64, n_layer=2, n_head=4, n_head_kv=4, n_ff=128, n_ctx=512, seed=7)


def write_tiny_gguf(folder: Path, name: str = "tiny") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_gguf(folder / f"{name}.gguf", TINY, byte_vocabulary())


def write_safetensors(folder: Path, shards: int = 3, shard_bytes: int = 1 << 20, seed: int = 1) -> Path:
    """``folder`` with config.json, model-0000i-of-0000n.safetensors and their index."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "torch_dtype": "bfloat16"}  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    weight_map = {}
    rng = __import__("random").Random(seed)
    for i in range(1, shards + 1):
        name = f"model-{i:05d}-of-{shards:05d}.safetensors"
        count = shard_bytes // 2
        header = json.dumps({f"w{i}": {"dtype": "BF16", "shape": [count], "data_offsets": [0, 2 * count]}})
        header_bytes = header.encode() + b" " * (-len(header) % 8)
        with open(folder / name, "wb") as fh:
            fh.write(struct.pack("<Q", len(header_bytes)) + header_bytes)
            fh.write(rng.randbytes(2 * count) if hasattr(rng, "randbytes") else os.urandom(2 * count))
        weight_map[f"w{i}"] = name
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return folder


def flip_byte(path: Path, offset: int | None = None) -> None:
    """Change one byte in place, keeping the size and the mtime (what a listing's cache keys on)."""
    st = path.stat()
    where = st.st_size // 2 if offset is None else offset
    with open(path, "r+b") as fh:
        fh.seek(where)
        byte = fh.read(1)
        fh.seek(where)
        fh.write(bytes([byte[0] ^ 0xFF]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
