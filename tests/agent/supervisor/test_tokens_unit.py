"""Tokens/s from engine counters (fake exposition text) and from training log lines."""

from __future__ import annotations

import json

import pytest

from sparksync_agent.protocol import TokensSource
from sparksync_agent.supervisor.tokens import (
    CounterRate,
    LogTokens,
    PrometheusTokens,
    SlotTask,
    busy_slots,
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


# --- live decode: llama-server's slots, SGLang's gauge, vLLM's per-step counter ----------------


def slots_json(*slots: tuple[int, int | None, bool, int]) -> str:
    """llama-server's /slots answer (tools/server/README.md): (id, id_task, is_processing, n_decoded)."""
    entries = []
    for slot, task, busy, decoded in slots:
        entry = {"id": slot, "n_ctx": 2048, "speculative": False, "is_processing": busy}
        if task is not None:
            entry |= {"id_task": task, "next_token": [{"has_next_token": busy, "n_remain": -1, "n_decoded": decoded}]}
        entries.append(entry)
    return json.dumps(entries)


def live_source() -> TokensSource:
    return llamacpp_source().model_copy(update={"slots_path": "/slots"})


def test_a_long_answer_shows_its_tokens_per_second_while_the_counter_stands_still():
    tokens = PrometheusTokens(live_source())
    counter = LLAMACPP.format(prompt=10, predicted=0)
    tokens.update(0.0, counter, slots_json((0, 7, True, 0), (1, None, False, 0)))
    assert tokens.decode_rate is None
    tokens.update(1.0, counter, slots_json((0, 7, True, 55), (1, None, False, 0)))
    assert tokens.decode_rate == 55.0 and tokens.live
    tokens.update(2.0, counter, slots_json((0, 7, True, 110), (1, None, False, 0)))
    assert tokens.decode_rate == 55.0
    # The answer ends at 150 tokens between readings: the counter gets all 150, 110 were already counted.
    tokens.update(3.0, LLAMACPP.format(prompt=10, predicted=150), slots_json((0, 7, False, 0)))
    assert tokens.decode_rate == 40.0
    tokens.update(4.0, LLAMACPP.format(prompt=10, predicted=150), slots_json((0, 7, False, 0)))
    assert tokens.decode_rate == 0.0


def test_short_answers_between_readings_come_from_the_counter():
    tokens = PrometheusTokens(live_source())
    tokens.update(0.0, LLAMACPP.format(prompt=0, predicted=0), slots_json((0, None, False, 0)))
    # Twenty 64-token answers began and ended in one second; one more is 10 tokens in.
    tokens.update(1.0, LLAMACPP.format(prompt=0, predicted=1280), slots_json((0, 30, True, 10)))
    assert tokens.decode_rate == 1290.0


def test_an_answer_that_ends_between_the_two_reads_is_owed_not_lost_or_doubled():
    tokens = PrometheusTokens(live_source())
    tokens.update(0.0, LLAMACPP.format(prompt=0, predicted=0), slots_json((0, 4, True, 100)))
    # The counter was read just before the answer ended (200 tokens), the slots just after.
    tokens.update(1.0, LLAMACPP.format(prompt=0, predicted=0), slots_json((0, 4, False, 0)))
    assert tokens.decode_rate == 0.0
    tokens.update(2.0, LLAMACPP.format(prompt=0, predicted=200), slots_json((0, 4, False, 0)))
    assert tokens.decode_rate == 100.0  # its last 100 tokens, once
    tokens.update(3.0, LLAMACPP.format(prompt=0, predicted=200), slots_json((0, 4, False, 0)))
    assert tokens.decode_rate == 0.0


def test_a_new_task_on_a_slot_counts_from_zero_and_the_old_one_is_settled_by_the_counter():
    tokens = PrometheusTokens(live_source())
    tokens.update(0.0, LLAMACPP.format(prompt=0, predicted=0), slots_json((0, 1, True, 30)))
    tokens.update(1.0, LLAMACPP.format(prompt=0, predicted=50), slots_json((0, 2, True, 20)))
    assert tokens.decode_rate == 40.0  # 20 more for task 1, then 20 of task 2


def test_without_a_slots_endpoint_decode_falls_back_to_the_counter():
    tokens = PrometheusTokens(live_source())
    error = json.dumps({"error": {"code": 501, "message": "This server does not support slots endpoint."}})
    tokens.update(0.0, LLAMACPP.format(prompt=0, predicted=0), error)
    tokens.update(1.0, LLAMACPP.format(prompt=0, predicted=64), error)
    assert tokens.decode_rate == 64.0 and not tokens.live
    tokens.update(2.0, LLAMACPP.format(prompt=0, predicted=128), None)
    assert tokens.decode_rate == 64.0 and not tokens.live


def test_busy_slots_reads_only_busy_ones_and_refuses_what_is_not_a_slot_list():
    assert busy_slots(slots_json((0, 3, True, 12), (1, 2, False, 0))) == {0: SlotTask(3, 12)}
    with pytest.raises(ValueError):
        busy_slots('{"error": "no"}')
    with pytest.raises(ValueError):
        busy_slots("[{}]")


# vLLM V1 at three engine steps of one answer (the counter grows per step, docs/design/metrics.md).
VLLM_STEPS = [
    """\
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="qwen"} %d
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 1.0
"""
    % n
    for n in (0, 12, 24)
]


def test_vllm_generation_counter_follows_an_answer_step_by_step():
    source = TokensSource(kind="prometheus", port=8000, decode_counter="vllm:generation_tokens_total")
    tokens = PrometheusTokens(source)
    rates = []
    for second, text in enumerate(VLLM_STEPS):
        tokens.update(float(second), text)
        rates.append(tokens.decode_rate)
    assert rates == [None, 12.0, 12.0]


SGLANG_LIVE = """\
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{{model_name="qwen"}} {done}
# HELP sglang:gen_throughput The generation throughput (token/s).
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{{model_name="qwen"}} {gauge}
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{model_name="qwen"}} {running}
"""


def test_sglang_reads_its_throughput_gauge_while_requests_run_and_ignores_its_stale_value_after():
    source = TokensSource(
        kind="prometheus", port=30000, decode_counter="sglang:generation_tokens_total",
        decode_gauge="sglang:gen_throughput", busy_gauge="sglang:num_running_reqs",
    )  # fmt: skip
    tokens = PrometheusTokens(source)
    tokens.update(0.0, SGLANG_LIVE.format(done=0, gauge=0.0, running=1))
    assert tokens.decode_rate == 0.0
    tokens.update(1.0, SGLANG_LIVE.format(done=0, gauge=11.9, running=1))
    assert tokens.decode_rate == 11.9  # the counter has not moved: the request has not ended
    tokens.update(2.0, SGLANG_LIVE.format(done=256, gauge=11.9, running=0))
    tokens.update(3.0, SGLANG_LIVE.format(done=256, gauge=11.9, running=0))
    assert tokens.decode_rate == 0.0  # idle: the gauge's last value is stale
