"""Tokens/s from engine counters (fake exposition text) and from training log lines."""

from __future__ import annotations

import pytest

from sparksync_agent.protocol import TokensSource
from sparksync_agent.supervisor.tokens import (
    CounterRate,
    LogTokens,
    PrometheusTokens,
    counter_values,
    parse_number,
)

LLAMACPP = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total {prompt}
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total {predicted}
# HELP llamacpp:predicted_tokens_seconds Average generation throughput in tokens/s.
# TYPE llamacpp:predicted_tokens_seconds gauge
llamacpp:predicted_tokens_seconds 123.4
"""

VLLM = """\
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{model_name="qwen",engine="0"}} {gen0}
vllm:generation_tokens_total{{model_name="qwen",engine="1"}} {gen1}
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{model_name="qwen",engine="0"}} 8192.0
"""

SGLANG = """\
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m"} 5000.0
"""


def llamacpp_source() -> TokensSource:
    return TokensSource(
        kind="prometheus", port=8080, decode_counter="llamacpp:tokens_predicted_total",
        prefill_counter="llamacpp:prompt_tokens_total",
    )  # fmt: skip


def test_llamacpp_counters_become_rates_per_second():
    tokens = PrometheusTokens(llamacpp_source())
    tokens.update(10.0, LLAMACPP.format(prompt=100, predicted=1000))
    assert tokens.decode.rate is None and tokens.prefill.rate is None  # one reading is no rate yet
    tokens.update(12.0, LLAMACPP.format(prompt=900, predicted=1500))
    assert tokens.decode.rate == pytest.approx(250.0)
    assert tokens.prefill.rate == pytest.approx(400.0)


def test_vllm_counters_add_up_over_labels():
    values = counter_values(
        VLLM.format(gen0=10, gen1=30), ["vllm:generation_tokens_total", "vllm:prompt_tokens_total"]
    )
    assert values == {"vllm:generation_tokens_total": 40.0, "vllm:prompt_tokens_total": 8192.0}


def test_a_counter_named_without_its_total_suffix_is_found():
    assert counter_values(SGLANG, ["sglang:generation_tokens"]) == {"sglang:generation_tokens": 5000.0}


def test_missing_counters_and_failed_scrapes_make_the_rate_unknown():
    tokens = PrometheusTokens(llamacpp_source())
    tokens.update(0.0, LLAMACPP.format(prompt=0, predicted=0))
    tokens.update(1.0, LLAMACPP.format(prompt=0, predicted=50))
    assert tokens.decode.rate == 50.0
    tokens.update(2.0, None)
    assert tokens.decode.rate is None
    tokens.update(3.0, "# nothing here\n")
    assert tokens.decode.rate is None


def test_a_counter_that_goes_down_is_a_restarted_engine_not_a_negative_rate():
    rate = CounterRate()
    rate.update(0.0, 1000.0)
    rate.update(1.0, 1100.0)
    assert rate.rate == 100.0
    assert rate.update(2.0, 5.0) == 100.0  # skipped
    assert rate.update(3.0, 25.0) == 20.0


NANOCHAT = (
    r"step (?P<step>\d+)/\d+\b.*?\| loss: (?P<loss>[-+0-9.eE]+|nan|inf)\b"
    r".*?\| tok/sec: (?P<tokens_per_s>[0-9][0-9,]*(?:\.[0-9]+)?)"
)


def test_nanochat_lines_give_tokens_per_second_step_and_loss():
    tokens = LogTokens(TokensSource(kind="log", pattern=NANOCHAT))
    assert not tokens.feed("Loading the dataset...")
    line = (
        "step 00009/00010 (90.00%) | loss: 7.620000 | lrm: 1.00 | dt: 110.37ms | tok/sec: 4,649 | mfu: 0.01"
    )
    assert tokens.feed(line)
    assert (tokens.figures.tokens_per_s, tokens.figures.step, tokens.figures.loss) == (4649.0, 9, 7.62)
    tokens.feed("step 00010/00010 (100.00%) | loss: nan | dt: 100ms | tok/sec: 68,079.5 | mfu: 0.01")
    assert (tokens.figures.tokens_per_s, tokens.figures.step, tokens.figures.loss) == (68079.5, 10, None)


@pytest.mark.parametrize("text, value", [("4,649", 4649.0), ("1_000.5", 1000.5), (" 12 ", 12.0)])
def test_numbers_with_thousands_separators(text, value):
    assert parse_number(text) == value
