"""How a finished llama-benchy run is judged: complete only when every test has both speeds.

llama-benchy writes ``"tg_throughput": null`` for a test when in none of its
runs it could time two tokens apart (they all arrived in one read), and
``"pp_throughput": null`` when in every run the first response came sooner than
its estimate of the network latency. Such a run lacks a figure, so it is
partial, with the reason, never complete.
"""

from __future__ import annotations

import pytest

from sparksync.core.bench.endpoint import Endpoint
from sparksync.core.bench.profile import BenchProfile
from sparksync.core.bench.progress import ProgressTracker
from sparksync.core.bench.results import measured_rows
from sparksync.core.bench.runner import BenchRequest, BenchRunner, _judge

PROFILE = BenchProfile.build(pp=(64,), tg=(8,), runs=2)


def metric(mean: float) -> dict:
    return {"mean": mean, "std": 0.0, "values": [mean, mean]}


def result(tg: int = 8, decode: float | None = 100.0, prefill: float | None = 2000.0) -> dict:
    entry = {"prompt_size": 64, "response_size": tg, "context_size": 0, "concurrency": 1,
             "tg_throughput": metric(decode) if decode is not None else None,
             "pp_throughput": metric(prefill) if prefill is not None else None,
             "e2e_ttft": metric(30.0)}
    return {"version": "0.4.0", "benchmarks": [entry]}


def run_benchy(server, tokenizer_json):
    """The real llama-benchy through the runner: the outcome, and the one test entry llama-benchy wrote."""
    request = BenchRequest(Endpoint.parse(server.base_url), server.settings.model, tokenizer_json, PROFILE)
    outcome = BenchRunner(request).run()
    (entry,) = outcome.result["benchmarks"]
    return outcome, entry


def judge(data: dict, profile: BenchProfile = PROFILE):
    return _judge(data, ProgressTracker(profile.request_count()), profile, False, 0, "")


def test_both_speeds_make_a_complete_run():
    assert judge(result()) == ("complete", None)


def test_a_test_without_a_decode_speed_is_partial_with_the_reason():
    status, error = judge(result(decode=None))
    assert status == "partial"
    assert error.startswith("pp64 tg8 c1: llama-benchy measured no decode speed (in every run the tokens arrived at once")
    assert error.endswith("check the endpoint's log, then run the benchmark again")


def test_a_test_without_a_prefill_speed_is_partial_with_the_reason():
    status, error = judge(result(prefill=None))
    assert status == "partial"
    assert error.startswith("pp64 tg8 c1: llama-benchy measured no prefill speed (in every run the first response")


def test_one_generated_token_has_no_decode_speed_to_miss():
    one = BenchProfile.build(pp=(64,), tg=(1,), runs=2)
    assert judge(result(tg=1, decode=None), one) == ("complete", None)


@pytest.mark.slow
def test_tokens_that_arrive_in_one_burst_give_a_partial_run_not_a_complete_one(make_fake, tokenizer_json):
    """The real llama-benchy against a server that sends each answer's tokens in one write."""
    outcome, entry = run_benchy(make_fake(burst=True), tokenizer_json)
    assert entry["tg_throughput"] is None and entry["pp_throughput"]["mean"] > 0  # what llama-benchy wrote
    assert outcome.status == "partial", (outcome.error, outcome.log_tail)
    assert "pp64 tg8 c1: llama-benchy measured no decode speed" in outcome.error
    assert [r.decode_tps for r in measured_rows(outcome.result)] == [None]  # the prefill figure is kept


@pytest.mark.slow
def test_a_model_list_slower_than_the_first_token_gives_a_partial_run(make_fake, tokenizer_json):
    """The real llama-benchy, whose latency estimate (a timed model list) swallows the prefill time."""
    outcome, entry = run_benchy(make_fake(models_delay_s=0.2), tokenizer_json)
    assert entry["pp_throughput"] is None and entry["tg_throughput"]["mean"] > 0  # what llama-benchy wrote
    assert outcome.status == "partial", (outcome.error, outcome.log_tail)
    assert "pp64 tg8 c1: llama-benchy measured no prefill speed" in outcome.error
