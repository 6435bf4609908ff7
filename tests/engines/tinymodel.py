"""Tiny random-weight llama models, made locally, for real-engine tests.

A real engine needs a real model file, and nothing may come from a model hub,
so the tests write their own: a llama-architecture GGUF with random F32
weights and a byte-level BPE vocabulary trained here with ``tokenizers``. The
same vocabulary is saved as ``tokenizer.json`` so a benchmark client
(llama-benchy) counts tokens exactly as the server does.

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

import numpy as np

# The Rust thread pool in tokenizers warns (and can deadlock) when the process
# forks after training; the tests fork engine processes right after.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import gguf  # noqa: E402  (must see the environment above first)
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

BOS, EOS, IM_START, IM_END = "<|bos|>", "<|eos|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [BOS, EOS, IM_START, IM_END]
VOCAB_SIZE = 1024

# ChatML: llama-server renders chat requests with it (jinja), and <|im_end|> is a
# control token so it never leaks into streamed text.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_WORDS = (
    "the model node cluster spark memory token stream inference training rank fabric "
    "latency throughput gpu cpu network engine server client request answer prompt "
    "o modelo nó memória unificada treino inferência rede latência resposta pedido "
    "ação coração informação São Paulo Lisboa água não então também você é está "
    "def return import class self print for while if else None True False"
).split()


@dataclass(frozen=True)
class ModelSpec:
    """Shape of one tiny model; head_dim = n_embd / n_head."""

    name: str
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_ctx: int = 4096
    seed: int = 0


@dataclass(frozen=True)
class TinyModel:
    """Files of one written model, ready for ``llama-server -m``."""

    spec: ModelSpec
    gguf: Path
    tokenizer_json: Path

    @property
    def name(self) -> str:
        return self.spec.name


# ~1 MB: thousands of tokens/s on 2 cores.
SMALL = ModelSpec("tiny-small", n_embd=64, n_layer=2, n_head=4, n_head_kv=4, n_ff=256, seed=1)
# ~100 MB: roughly ten times slower, so a speed difference is measurable.
LARGE = ModelSpec("tiny-large", n_embd=512, n_layer=8, n_head=8, n_head_kv=4, n_ff=1376, seed=2)


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


def write_tiny_model(directory: Path, spec: ModelSpec, tokenizer: Tokenizer | None = None) -> TinyModel:
    """Write ``<name>.gguf`` and ``<name>.tokenizer.json`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = tokenizer or train_tokenizer()
    tokenizer_json = directory / f"{spec.name}.tokenizer.json"
    tokenizer.save(str(tokenizer_json))
    vocab = _vocabulary(tokenizer_json)
    path = directory / f"{spec.name}.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    _add_hparams(writer, spec, len(vocab.tokens))
    _add_vocabulary(writer, vocab)
    for name, array in _random_tensors(spec, len(vocab.tokens)):
        writer.add_tensor(name, array)
    _flush(writer)
    return TinyModel(spec=spec, gguf=path, tokenizer_json=tokenizer_json)


@dataclass(frozen=True)
class _Vocabulary:
    tokens: list[str]
    token_types: list[int]
    merges: list[str]
    bos_id: int
    eos_id: int


def _vocabulary(tokenizer_json: Path) -> _Vocabulary:
    """Tokens by id, their types and merges, read back from the saved tokenizer.json.

    Reading the JSON (not the Python API) guarantees the GGUF and the file a
    client loads hold the very same strings, in the byte-to-unicode form GPT-2
    vocabularies use.
    """
    data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    by_id = {i: t for t, i in data["model"]["vocab"].items()}
    for added in data["added_tokens"]:
        by_id[added["id"]] = added["content"]
    tokens = [by_id[i] for i in range(len(by_id))]
    types = [int(gguf.TokenType.CONTROL if t in SPECIAL_TOKENS else gguf.TokenType.NORMAL) for t in tokens]
    # tokenizers >= 0.20 stores a merge as a pair; older versions as "a b".
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    return _Vocabulary(tokens, types, merges, tokens.index(BOS), tokens.index(IM_END))


def _add_hparams(writer: gguf.GGUFWriter, spec: ModelSpec, n_vocab: int) -> None:
    writer.add_name(spec.name)
    writer.add_context_length(spec.n_ctx)
    writer.add_embedding_length(spec.n_embd)
    writer.add_block_count(spec.n_layer)
    writer.add_feed_forward_length(spec.n_ff)
    writer.add_head_count(spec.n_head)
    writer.add_head_count_kv(spec.n_head_kv)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(spec.n_embd // spec.n_head)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)


def _add_vocabulary(writer: gguf.GGUFWriter, vocab: _Vocabulary) -> None:
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.token_types)
    writer.add_token_merges(vocab.merges)
    writer.add_bos_token_id(vocab.bos_id)
    # The end-of-turn token ends generation, as in real ChatML models.
    writer.add_eos_token_id(vocab.eos_id)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)


def _random_tensors(spec: ModelSpec, n_vocab: int):
    """(name, array) pairs; numpy shapes are ggml's dimensions reversed ([out, in])."""
    rng = np.random.default_rng(spec.seed)
    n_kv = spec.n_embd // spec.n_head * spec.n_head_kv

    def weight(*shape: int) -> np.ndarray:
        return rng.normal(0.0, 0.02, size=shape).astype(np.float32)

    def ones() -> np.ndarray:
        return np.ones(spec.n_embd, dtype=np.float32)

    yield "token_embd.weight", weight(n_vocab, spec.n_embd)
    for i in range(spec.n_layer):
        yield f"blk.{i}.attn_norm.weight", ones()
        yield f"blk.{i}.attn_q.weight", weight(spec.n_embd, spec.n_embd)
        yield f"blk.{i}.attn_k.weight", weight(n_kv, spec.n_embd)
        yield f"blk.{i}.attn_v.weight", weight(n_kv, spec.n_embd)
        yield f"blk.{i}.attn_output.weight", weight(spec.n_embd, spec.n_embd)
        yield f"blk.{i}.ffn_norm.weight", ones()
        yield f"blk.{i}.ffn_gate.weight", weight(spec.n_ff, spec.n_embd)
        yield f"blk.{i}.ffn_up.weight", weight(spec.n_ff, spec.n_embd)
        yield f"blk.{i}.ffn_down.weight", weight(spec.n_embd, spec.n_ff)
    yield "output_norm.weight", ones()
    yield "output.weight", weight(n_vocab, spec.n_embd)


def _flush(writer: gguf.GGUFWriter) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def layer_tensor_bytes(spec: ModelSpec) -> int:
    """Bytes of the repeating blocks: what ``-ngl 99`` moves off the host (F32)."""
    n_kv = spec.n_embd // spec.n_head * spec.n_head_kv
    per_layer = 2 * spec.n_embd + 2 * spec.n_embd**2 + 2 * n_kv * spec.n_embd + 3 * spec.n_ff * spec.n_embd
    return 4 * spec.n_layer * per_layer
