"""Tiny random-weight llama models, made locally, for real-engine tests.

A real engine needs a real model file, and nothing may come from a model hub,
so the tests write their own with the product's writer
(``sparksync.core.engines.tiny_model``, which also writes the app's demo
model): a llama-architecture GGUF with random F32 weights and a byte-level
BPE vocabulary trained here with ``tokenizers``. The same vocabulary is saved
as ``tokenizer.json`` so a benchmark client (llama-benchy) counts tokens
exactly as the server does.

The output is gibberish, which is fine: the tests measure that tokens flow,
how fast, and where the computation runs, never what the model says.

    model = write_tiny_model(tmp_dir, SMALL)   # -> TinyModel(gguf=..., tokenizer_json=...)
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

# The Rust thread pool in tokenizers warns (and can deadlock) when the process
# forks after training; the tests fork engine processes right after.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

from sparksync.core.engines.tiny_model import (  # noqa: E402
    SPECIAL_TOKENS,
    ModelShape,
    Vocabulary,
    layer_tensor_bytes,
    vocabulary,
    write_gguf,
)

__all__ = ["LARGE", "SMALL", "ModelShape", "TinyModel", "layer_tensor_bytes", "train_tokenizer", "write_tiny_model"]

VOCAB_SIZE = 1024

_WORDS = (
    "the model node cluster spark memory token stream inference training rank fabric "
    "latency throughput gpu cpu network engine server client request answer prompt "
    "o modelo nó memória unificada treino inferência rede latência resposta pedido "
    "ação coração informação São Paulo Lisboa água não então também você é está "
    "def return import class self print for while if else None True False"
).split()


@dataclass(frozen=True)
class TinyModel:
    """Files of one written model, ready for ``llama-server -m``."""

    spec: ModelShape
    gguf: Path
    tokenizer_json: Path

    @property
    def name(self) -> str:
        return self.spec.name


# ~1 MB: thousands of tokens/s on 2 cores.
SMALL = ModelShape("tiny-small", n_embd=64, n_layer=2, n_head=4, n_head_kv=4, n_ff=256, seed=1)
# ~100 MB: roughly ten times slower, so a speed difference is measurable.
LARGE = ModelShape("tiny-large", n_embd=512, n_layer=8, n_head=8, n_head_kv=4, n_ff=1376, seed=2)


def training_corpus(n_lines: int = 4000, seed: int = 0) -> list[str]:
    """Deterministic mixed English/Portuguese/code-ish lines to learn merges from."""
    rng = random.Random(seed)
    lines = []
    for i in range(n_lines):
        words = rng.choices(_WORDS, k=rng.randint(4, 16))
        lines.append(f"{' '.join(words).capitalize()} {i % 97}, {rng.random():.3f}!?")
    return lines


def train_tokenizer(vocab_size: int = VOCAB_SIZE, corpus: list[str] | None = None) -> Tokenizer:
    """Byte-level BPE (GPT-2 style): every byte is a token, so any text encodes."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus or training_corpus(), trainer=trainer)
    return tokenizer


def write_tiny_model(directory: Path, spec: ModelShape, tokenizer: Tokenizer | None = None) -> TinyModel:
    """Write ``<name>.gguf`` and ``<name>.tokenizer.json`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = tokenizer or train_tokenizer()
    tokenizer_json = directory / f"{spec.name}.tokenizer.json"
    tokenizer.save(str(tokenizer_json))
    path = write_gguf(directory / f"{spec.name}.gguf", spec, _vocabulary(tokenizer_json))
    return TinyModel(spec=spec, gguf=path, tokenizer_json=tokenizer_json)


def _vocabulary(tokenizer_json: Path) -> Vocabulary:
    """Tokens by id and merges, read back from the saved tokenizer.json.

    Reading the JSON (not the Python API) guarantees the GGUF and the file a
    client loads hold the very same strings, in the byte-to-unicode form GPT-2
    vocabularies use.
    """
    data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    by_id = {i: t for t, i in data["model"]["vocab"].items()}
    for added in data["added_tokens"]:
        by_id[added["id"]] = added["content"]
    tokens = [by_id[i] for i in range(len(by_id))]
    # tokenizers >= 0.20 stores a merge as a pair; older versions as "a b".
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    return vocabulary(tokens, merges)
