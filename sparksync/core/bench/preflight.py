"""Checks made before llama-benchy starts, so a bad input fails in seconds with a clear error.

* the endpoint answers and serves the model;
* the tokenizer is the served model's: llama-benchy cuts prompts by counting
  tokens with it, so a different vocabulary silently benchmarks other prompt
  sizes than the profile says. The server counts a sample of the prompt
  text (``usage.prompt_tokens``), the tokenizer counts the same sample, and
  the two must agree; a vocabulary larger than the model's is refused outright;
* every request of the profile fits the server's context per request
  (llama.cpp's per-slot ``n_ctx``, vLLM's ``max_model_len``);
* the server's speculative decoding matches the profile (a warning only);
* whether the server drops connections after a streamed reply, which
  llama-benchy's connection reuse does not survive (see benchy.py).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from sparksync.core.bench.endpoint import Endpoint, EndpointProbe
from sparksync.core.bench.errors import (
    BenchInputError,
    ModelNotServedError,
    ProfileTooLargeError,
    TokenizerMismatchError,
)
from sparksync.core.bench.profile import BenchProfile

log = logging.getLogger(__name__)

SAMPLE_TOKENS = 256
# Chat templates may merge a token or two where the message meets the template.
COUNT_SLACK_TOKENS = 3
COUNT_SLACK_FRACTION = 0.05
SHORT_TEXT = "."


class ServerFacts(BaseModel):
    """What the endpoint said about itself; stored with the run."""

    served_models: list[str] = Field(default_factory=list)
    n_ctx: int | None = None
    n_vocab: int | None = None
    owned_by: str | None = None
    build_info: str | None = None
    speculative: bool | None = None
    template_tokens: int | None = None
    closes_after_stream: bool | None = None
    model_path: str | None = Field(None, description="The model file the server loaded (llama.cpp's /props)")


class PreflightReport(BaseModel):
    facts: ServerFacts
    tokenizer_vocab: int
    sample_tokens_local: int | None = None
    sample_tokens_server: int | None = None
    warnings: list[str] = Field(default_factory=list)


def resolve_tokenizer(path: Path) -> Path:
    """The ``tokenizer.json`` to use: the file itself, or the one in a model's folder."""
    candidate = path / "tokenizer.json" if path.is_dir() else path
    if not candidate.is_file():
        where = f"{path} has no tokenizer.json" if path.is_dir() else f"{path} does not exist"
        raise BenchInputError(f"tokenizer: {where}; give the tokenizer.json from the model's own files")
    return candidate


def load_tokenizer(path: Path):
    """A ``tokenizers.Tokenizer`` (the library llama-benchy itself uses for local files)."""
    from tokenizers import Tokenizer  # llama-benchy's dependency; imported only when benchmarking

    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # the Rust side raises plain Exception for a bad file
        raise BenchInputError(f"{path} is not a tokenizer.json that can be loaded ({exc}); "
                              "give the tokenizer.json from the model's own files") from None


def run_preflight(endpoint: Endpoint, model: str, tokenizer_path: Path, profile: BenchProfile,
                  prompt_text: str) -> PreflightReport:
    tokenizer = load_tokenizer(tokenizer_path)
    with EndpointProbe(endpoint) as probe:
        entry, served = _find_model(probe.models(), model, endpoint)
        facts = _server_facts(entry, served, probe.props())
        vocab = tokenizer.get_vocab_size(with_added_tokens=True)
        _check_vocab(vocab, facts, tokenizer_path)
        facts.template_tokens = _template_tokens(probe, model, tokenizer)
        _check_context(profile, facts)
        local, server = _count_sample(probe, model, tokenizer, prompt_text, facts)
        facts.closes_after_stream = probe.closes_after_stream(model)
    report = PreflightReport(facts=facts, tokenizer_vocab=vocab, sample_tokens_local=local,
                             sample_tokens_server=server)
    report.warnings += _warnings(report, profile)
    _check_counts(report, tokenizer_path)
    return report


def _find_model(entries: list[dict[str, Any]], model: str, endpoint: Endpoint) -> tuple[dict, list[str]]:
    served = [str(e.get("id")) for e in entries if e.get("id")]
    for entry in entries:
        names = {entry.get("id"), *(entry.get("aliases") or [])}
        if model in names:
            return entry, served
    listed = ", ".join(served) or "none"
    raise ModelNotServedError(f"{endpoint.base_url} does not serve {model!r} (it serves: {listed}); "
                              "pass one of those names with --model")


def _server_facts(entry: dict[str, Any], served: list[str], props: dict[str, Any] | None) -> ServerFacts:
    meta = entry.get("meta")
    meta = meta if isinstance(meta, dict) else {}
    settings = (props or {}).get("default_generation_settings") or {}
    # Per-request context: llama.cpp's per-slot n_ctx (/props, then /v1/models meta), vLLM's max_model_len.
    n_ctx = _first_int(settings.get("n_ctx"), meta.get("n_ctx"), entry.get("max_model_len"))
    speculative_types = (settings.get("params") or {}).get("speculative.types")
    return ServerFacts(
        served_models=served,
        n_ctx=n_ctx,
        n_vocab=_first_int(meta.get("n_vocab")),
        owned_by=entry.get("owned_by"),
        build_info=(props or {}).get("build_info"),
        model_path=_text((props or {}).get("model_path")),
        speculative=None if speculative_types is None else str(speculative_types).lower() != "none",
    )


def _check_vocab(vocab: int, facts: ServerFacts, path: Path) -> None:
    # A model may pad its embedding beyond the tokenizer (Qwen does), never the other way round.
    if facts.n_vocab is not None and vocab > facts.n_vocab:
        raise TokenizerMismatchError(
            f"the tokenizer {path} has {vocab} tokens but the served model only {facts.n_vocab}: it is not "
            "this model's tokenizer. Give the tokenizer.json from the served model's own files.")


def _template_tokens(probe: EndpointProbe, model: str, tokenizer) -> int | None:
    """Tokens the chat template adds around one message (the server's count minus the text's)."""
    total = probe.prompt_tokens(model, SHORT_TEXT)
    return None if total is None else max(0, total - _count(tokenizer, SHORT_TEXT))


def _check_context(profile: BenchProfile, facts: ServerFacts) -> None:
    if facts.n_ctx is None:
        return
    # With depth the context goes in a system message: a second message's worth of template.
    template = (facts.template_tokens or 0) * (2 if max(profile.depth) else 1)
    needed = profile.max_request_tokens() + template
    if needed > facts.n_ctx:
        raise ProfileTooLargeError(
            f"the profile needs up to {needed} tokens per request (depth {max(profile.depth)} + "
            f"prompt {max(profile.pp)} + generated {max(profile.tg)} + {template} for the chat template), "
            f"but the server's context is {facts.n_ctx} tokens per request. Restart the server with a "
            "larger context (llama-server: -c, divided among -np slots; vLLM: --max-model-len), "
            "or choose smaller --pp/--tg/--depth.")


def _count_sample(probe: EndpointProbe, model: str, tokenizer, text: str,
                  facts: ServerFacts) -> tuple[int | None, int | None]:
    if facts.template_tokens is None:
        return None, None  # the server reports no usage: nothing to compare against
    room = (facts.n_ctx or SAMPLE_TOKENS * 4) - facts.template_tokens - 8
    ids = tokenizer.encode(text, add_special_tokens=False).ids[: max(16, min(SAMPLE_TOKENS, room))]
    sample = tokenizer.decode(ids)
    local = _count(tokenizer, sample)
    total = probe.prompt_tokens(model, sample)
    if total is None:
        return local, None
    return local, total - facts.template_tokens


def _check_counts(report: PreflightReport, path: Path) -> None:
    local, server = report.sample_tokens_local, report.sample_tokens_server
    if local is None or server is None:
        return
    if abs(server - local) > max(COUNT_SLACK_TOKENS, COUNT_SLACK_FRACTION * local):
        raise TokenizerMismatchError(
            f"the tokenizer {path} counts {local} tokens in a sample of the prompt text where the server "
            f"counts {server}: it is not the served model's tokenizer, so the prompt sizes would be wrong. "
            "Give the tokenizer.json from the served model's own files.")


def _warnings(report: PreflightReport, profile: BenchProfile) -> list[str]:
    facts, found = report.facts, []
    if facts.n_ctx is None:
        found.append("the server does not say its context size; the profile's fit was not checked")
    if report.sample_tokens_server is None:
        found.append("the server reports no token usage; the tokenizer could not be checked against it")
    if facts.closes_after_stream:
        found.append("the server closes its connection after every streamed reply (llama.cpp's server does), "
                     "so llama-benchy runs with one connection per request; decode tokens/s is unaffected, "
                     "and TTFT includes a TCP connect (well under a millisecond on a local link)")
    if facts.speculative is not None and facts.speculative != profile.speculative_decoding:
        state = "on" if facts.speculative else "off"
        found.append(f"the server has speculative decoding {state}, unlike the profile; "
                     "the figures are not comparable with the published ones")
    return found


def _count(tokenizer, text: str) -> int:
    return len(tokenizer.encode(text, add_special_tokens=False).ids)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _first_int(*values: Any) -> int | None:
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
