"""Tiny random-weight llama models written here with the ``gguf`` package: the demo model, and the tests'.

A newcomer without a model file can still start an engine on this computer
and watch its tokens/s: ``write_demo_model()`` writes a llama-architecture
GGUF of about 1 MB with random F32 weights and a byte-level vocabulary
(every byte is a token, so any text encodes). It answers gibberish, fast:
thousands of tokens/s on two cores, which is what the demo shows.

The writer takes any shape and vocabulary, so the tests write their models
with it too (with a BPE vocabulary trained by ``tokenizers``, whose
``tokenizer.json`` a benchmark client then loads).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sparksync.core.base.paths import data_dir, ensure_dir

BOS, EOS, IM_START, IM_END = "<|bos|>", "<|eos|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [BOS, EOS, IM_START, IM_END]

# ChatML: llama-server renders chat requests with it (jinja), and <|im_end|> is a
# control token so it never leaks into streamed text.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@dataclass(frozen=True)
class ModelShape:
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
class Vocabulary:
    """Tokens by id (GPT-2's byte-to-unicode form), their GGUF types, BPE merges, and the ends."""

    tokens: list[str]
    token_types: list[int]
    merges: list[str]
    bos_id: int
    eos_id: int  # the end-of-turn token ends generation, as in real ChatML models


DEMO = ModelShape("sparksync-demo", n_embd=64, n_layer=2, n_head=4, n_head_kv=4, n_ff=256, seed=1)
DEMO_FILE = "sparksync-demo.gguf"


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters (what byte-level vocabularies hold)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = list(printable), 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


# What the demo vocabulary learns its merges from: words a user of this app types.
_DEMO_TEXT = (
    "the model node cluster spark memory token tokens stream inference training rank fabric latency "
    "throughput gpu cpu network engine server client request answer prompt hello world this computer "
    "what is how fast can you run a small model on the desktop and see its speed in tokens per second"
)


def byte_vocabulary(text: str = _DEMO_TEXT, merges: int = 200) -> Vocabulary:
    """The special tokens, every byte as a token, and up to ``merges`` byte-pair merges learnt from ``text``.

    Every byte is a token, so any text encodes; llama.cpp also wants some merges
    in a GPT-2 style vocabulary, so a few are learnt here (plain BPE, no training library).
    """
    to_char = byte_to_unicode()
    words = [[to_char[b] for b in (" " + w if i else w).encode()] for i, w in enumerate(text.split())]
    tokens = [*SPECIAL_TOKENS, *to_char.values()]
    learnt: list[str] = []
    for _ in range(merges):
        pairs: dict[tuple[str, str], int] = {}
        for word in words:
            for pair in zip(word, word[1:]):
                pairs[pair] = pairs.get(pair, 0) + 1
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))  # the most frequent; ties broken the same way each time
        learnt.append(f"{best[0]} {best[1]}")
        tokens.append(best[0] + best[1])
        words = [_merged(word, best) for word in words]
    return vocabulary(tokens, learnt)


def _merged(word: list[str], pair: tuple[str, str]) -> list[str]:
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def vocabulary(tokens: list[str], merges: list[str]) -> Vocabulary:
    """A vocabulary from its tokens by id (the special ones among them) and merges."""
    import gguf

    control, normal = int(gguf.TokenType.CONTROL), int(gguf.TokenType.NORMAL)
    types = [control if t in SPECIAL_TOKENS else normal for t in tokens]
    return Vocabulary(tokens, types, merges, tokens.index(BOS), tokens.index(IM_END))


def write_gguf(path: Path, shape: ModelShape, vocab: Vocabulary) -> Path:
    """Write the model to ``path`` (through a temporary file, renamed into place once whole)."""
    import gguf

    path = Path(path)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    writer = gguf.GGUFWriter(str(partial), "llama")
    try:
        _add_hparams(writer, shape, len(vocab.tokens))
        _add_vocabulary(writer, vocab)
        for name, array in _random_tensors(shape, len(vocab.tokens)):
            writer.add_tensor(name, array)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def demo_model_path() -> Path:
    return data_dir() / "models" / DEMO_FILE


def write_demo_model(path: Path | None = None) -> Path:
    """The demo model in SparkSync's data folder (written once; the same file after that)."""
    target = Path(path) if path is not None else demo_model_path()
    if target.is_file():
        return target
    ensure_dir(target.parent)
    return write_gguf(target, DEMO, byte_vocabulary())


def _add_hparams(writer, shape: ModelShape, n_vocab: int) -> None:
    import gguf

    writer.add_name(shape.name)
    writer.add_context_length(shape.n_ctx)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(shape.n_layer)
    writer.add_feed_forward_length(shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(shape.n_embd // shape.n_head)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)


def _add_vocabulary(writer, vocab: Vocabulary) -> None:
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.token_types)
    writer.add_token_merges(vocab.merges)
    writer.add_bos_token_id(vocab.bos_id)
    writer.add_eos_token_id(vocab.eos_id)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)


def _random_tensors(shape: ModelShape, n_vocab: int) -> Iterator[tuple[str, np.ndarray]]:
    """(name, array) pairs; numpy shapes are ggml's dimensions reversed ([out, in])."""
    rng = np.random.default_rng(shape.seed)
    n_kv = shape.n_embd // shape.n_head * shape.n_head_kv

    def weight(*dims: int) -> np.ndarray:
        return rng.normal(0.0, 0.02, size=dims).astype(np.float32)

    def ones() -> np.ndarray:
        return np.ones(shape.n_embd, dtype=np.float32)

    yield "token_embd.weight", weight(n_vocab, shape.n_embd)
    for i in range(shape.n_layer):
        yield f"blk.{i}.attn_norm.weight", ones()
        yield f"blk.{i}.attn_q.weight", weight(shape.n_embd, shape.n_embd)
        yield f"blk.{i}.attn_k.weight", weight(n_kv, shape.n_embd)
        yield f"blk.{i}.attn_v.weight", weight(n_kv, shape.n_embd)
        yield f"blk.{i}.attn_output.weight", weight(shape.n_embd, shape.n_embd)
        yield f"blk.{i}.ffn_norm.weight", ones()
        yield f"blk.{i}.ffn_gate.weight", weight(shape.n_ff, shape.n_embd)
        yield f"blk.{i}.ffn_up.weight", weight(shape.n_ff, shape.n_embd)
        yield f"blk.{i}.ffn_down.weight", weight(shape.n_embd, shape.n_ff)
    yield "output_norm.weight", ones()
    yield "output.weight", weight(n_vocab, shape.n_embd)


def layer_tensor_bytes(shape: ModelShape) -> int:
    """Bytes of the repeating blocks: what ``-ngl 99`` moves off the host (F32)."""
    n_kv = shape.n_embd // shape.n_head * shape.n_head_kv
    per_layer = 2 * shape.n_embd + 2 * shape.n_embd**2 + 2 * n_kv * shape.n_embd + 3 * shape.n_ff * shape.n_embd
    return 4 * shape.n_layer * per_layer
