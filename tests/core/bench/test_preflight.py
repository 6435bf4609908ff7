"""Checks before a benchmark: endpoint, model, tokenizer and context, each with a clear error."""

from __future__ import annotations

import pytest

from sparksync.core.bench.endpoint import Endpoint, normalize_base_url
from sparksync.core.bench.errors import (
    BenchInputError,
    EndpointUnreachableError,
    ModelNotServedError,
    ProfileTooLargeError,
    TokenizerMismatchError,
)
from sparksync.core.bench.preflight import resolve_tokenizer, run_preflight
from sparksync.core.bench.profile import BenchProfile
from sparksync.core.bench.prompt_source import DEFAULT_PROMPT_FILE
from tests.core.bench.fake_openai import GENERATION_PROMPT_TOKENS, TEMPLATE_TOKENS_PER_MESSAGE
from tests.engines.engine_procs import free_port

SMALL = BenchProfile.build(pp=(256,), tg=(32,), runs=1)
TEXT = DEFAULT_PROMPT_FILE.read_text()


def preflight(server, tokenizer, profile=SMALL, model="tiny-fake", key=None):
    return run_preflight(Endpoint.parse(server.base_url, key), model, tokenizer, profile, TEXT)


@pytest.mark.parametrize(("given", "expected"), [
    ("http://127.0.0.1:8080", "http://127.0.0.1:8080/v1"),
    ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1"),
    ("http://spark-1.local:8000/v1/", "http://spark-1.local:8000/v1"),
    ("https://gw.example/api/v1", "https://gw.example/api/v1"),
])
def test_endpoint_urls_end_in_the_api_path(given, expected):
    assert normalize_base_url(given) == expected


def test_llama_cpp_props_live_at_the_server_root():
    assert Endpoint.parse("http://h:1/v1").server_root == "http://h:1"
    assert Endpoint.parse("https://gw/api/v1").server_root == "https://gw/api"


@pytest.mark.parametrize("bad", ["127.0.0.1:8080", "ftp://h/v1", "http://"])
def test_a_url_without_scheme_or_host_is_refused(bad):
    with pytest.raises(BenchInputError, match="http://HOST:PORT/v1"):
        normalize_base_url(bad)


def test_the_api_key_stays_out_of_reprs():
    assert "s3cret" not in repr(Endpoint.parse("http://h:1", "s3cret"))


def test_a_matching_setup_passes_and_reports_what_the_server_said(fake_server, tokenizer_json):
    report = preflight(fake_server, tokenizer_json)
    facts = report.facts
    assert facts.served_models == ["tiny-fake"] and facts.n_ctx == 2048 and facts.speculative is False
    assert facts.template_tokens == TEMPLATE_TOKENS_PER_MESSAGE + GENERATION_PROMPT_TOKENS
    assert report.sample_tokens_local == report.sample_tokens_server == 256
    assert report.warnings == []


def test_nothing_listening_is_unreachable_with_what_to_do(tokenizer_json):
    endpoint = Endpoint.parse(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(EndpointUnreachableError) as caught:
        run_preflight(endpoint, "m", tokenizer_json, SMALL, TEXT)
    message = str(caught.value)
    assert f"nothing answers at {endpoint.base_url} (connection refused)" in message
    assert "start the model's server" in message


def test_a_model_the_server_does_not_serve_is_named_with_the_ones_it_does(fake_server, tokenizer_json):
    with pytest.raises(ModelNotServedError, match=r"does not serve 'qwen' \(it serves: tiny-fake\)"):
        preflight(fake_server, tokenizer_json, model="qwen")


def test_a_refused_key_says_to_give_one(make_fake, tokenizer_json):
    server = make_fake(api_key="right")
    with pytest.raises(EndpointUnreachableError, match=r"HTTP 401.*give the endpoint's API key"):
        preflight(server, tokenizer_json, key="wrong")
    assert preflight(server, tokenizer_json, key="right").facts.served_models == ["tiny-fake"]


def test_another_vocabulary_is_caught_by_counting(fake_server, other_tokenizer_json):
    with pytest.raises(TokenizerMismatchError) as caught:
        preflight(fake_server, other_tokenizer_json)
    message = str(caught.value)
    assert "counts" in message and "where the server counts" in message
    assert "tokenizer.json from the served model's own files" in message


def test_a_vocabulary_larger_than_the_model_is_refused_outright(make_fake, tokenizer_json):
    server = make_fake(n_vocab=512)  # the tokenizer has 1024 tokens
    with pytest.raises(TokenizerMismatchError, match="has 1024 tokens but the served model only 512"):
        preflight(server, tokenizer_json)


def test_a_profile_larger_than_the_context_is_refused_before_running(make_fake, tokenizer_json):
    server = make_fake(n_ctx=1024)
    profile = BenchProfile.build(pp=(1000,), tg=(64,), runs=1)
    with pytest.raises(ProfileTooLargeError) as caught:
        preflight(server, tokenizer_json, profile)
    message = str(caught.value)
    assert "needs up to 1071 tokens per request" in message  # 1000 + 64 + 7 template tokens
    assert "context is 1024 tokens per request" in message and "-c" in message
    # The check itself sent no benchmark request, only the short template probe.
    assert [r.get("stream", False) for r in server.counters.requests] == [False]


def test_servers_without_props_or_usage_pass_with_warnings(make_fake, tokenizer_json):
    server = make_fake(with_props=False, with_usage=False, n_ctx=None)
    report = preflight(server, tokenizer_json)
    assert any("context size" in w for w in report.warnings)
    assert any("no token usage" in w for w in report.warnings)


def test_speculative_decoding_on_the_server_is_a_warning(make_fake, tokenizer_json):
    report = preflight(make_fake(speculative="draft"), tokenizer_json)
    assert report.facts.speculative is True
    assert any("speculative decoding on" in w for w in report.warnings)


def test_tokenizer_path_may_be_the_model_folder(tmp_path, tokenizer_json):
    (tmp_path / "tokenizer.json").write_bytes(tokenizer_json.read_bytes())
    assert resolve_tokenizer(tmp_path) == tmp_path / "tokenizer.json"
    with pytest.raises(BenchInputError, match="has no tokenizer.json"):
        resolve_tokenizer(tmp_path / "..")
    with pytest.raises(BenchInputError, match="does not exist"):
        resolve_tokenizer(tmp_path / "missing.json")


def test_a_file_that_is_no_tokenizer_is_refused(fake_server, tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}")
    with pytest.raises(BenchInputError, match="is not a tokenizer.json that can be loaded"):
        preflight(fake_server, bad)
