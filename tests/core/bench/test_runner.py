"""The real, pinned llama-benchy driven against a fake OpenAI server: progress, cancel, failures.

The fake server sets the speed and the failures; everything else is real:
the subprocess, its JSON and JSONL output, SIGINT handling and the prompt
server. The real-engine checks are in test_bench_engine.py.
"""

from __future__ import annotations

import importlib.metadata
import threading
from pathlib import Path

import pytest

from sparksync.core.bench import benchy
from sparksync.core.bench.endpoint import Endpoint
from sparksync.core.bench.errors import BenchCancelledError, BenchToolError
from sparksync.core.bench.profile import BenchProfile
from sparksync.core.bench.prompt_source import DEFAULT_PROMPT_FILE
from sparksync.core.bench.results import measured_rows, summarize
from sparksync.core.bench.runner import BenchRequest, BenchRunner
from tests.core.bench.fixtures import second_test_began

pytestmark = pytest.mark.slow

TWO_TESTS = BenchProfile.build(pp=(128,), tg=(16, 32), runs=3)
TINY = BenchProfile.build(pp=(64,), tg=(4,), runs=1)
PREFLIGHT_STREAMS = 2  # the preflight streams twice on one connection to test keep-alive


def request(server, tokenizer: Path, profile: BenchProfile, key: str | None = None) -> BenchRequest:
    return BenchRequest(Endpoint.parse(server.base_url, key), server.settings.model, tokenizer, profile)


def test_a_run_completes_with_llama_benchys_figures_and_live_progress(fake_server, tokenizer_json):
    updates = []
    profile = BenchProfile.build(pp=(128,), tg=(16,), runs=2)
    outcome = BenchRunner(request(fake_server, tokenizer_json, profile), on_progress=updates.append).run()

    assert outcome.status == "complete", (outcome.error, outcome.log_tail)
    assert outcome.error is None and outcome.warnings == [] and not outcome.cancelled
    (row,) = measured_rows(outcome.result)
    assert (row.prompt_size, row.response_size, row.concurrency) == (128, 16, 1)
    assert summarize(outcome.result).decode_tps == row.decode_tps > 0
    assert outcome.result["version"] == benchy.LLAMA_BENCHY_VERSION
    fractions = [u.fraction for u in updates]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and updates[-1].finished
    assert updates[-1].requests_done == updates[-1].requests_total == 2
    assert any(u.tokens_per_second for u in updates)


def test_prompts_are_cut_from_the_shipped_text(fake_server, tokenizer_json):
    BenchRunner(request(fake_server, tokenizer_json, BenchProfile.build(pp=(128,), tg=(4,), runs=1))).run()
    text = DEFAULT_PROMPT_FILE.read_text()
    streamed = [r for r in fake_server.counters.requests if r.get("stream")]
    assert streamed, "llama-benchy sent no benchmark request"
    prompt = streamed[-1]["messages"][-1]["content"]
    middle = prompt[len(prompt) // 2: len(prompt) // 2 + 40]
    assert middle in text, f"{middle!r} is not from {DEFAULT_PROMPT_FILE.name}"


def test_the_run_stays_offline_and_off_the_users_home(fake_server, tokenizer_json, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    outcome = BenchRunner(request(fake_server, tokenizer_json, TINY)).run()
    assert outcome.status == "complete", outcome.log_tail
    assert not (tmp_path / ".cache").exists(), "llama-benchy cached the prompt text in the user's home"
    env = benchy.environment(tmp_path / "private", None)
    assert env["HF_HUB_OFFLINE"] == "1" and env["HOME"] == str(tmp_path / "private")
    assert "127.0.0.1" in env["NO_PROXY"].split(",")


def test_the_api_key_reaches_the_server_but_not_the_process_list(make_fake, tokenizer_json):
    server = make_fake(api_key="k-123")
    runner = BenchRunner(request(server, tokenizer_json, TINY, "k-123"))
    assert runner.run().status == "complete"
    assert server.counters.authorizations == {"Bearer k-123"}
    call = benchy.BenchyCall("u", "m", "m", Path("t"), "b", BenchProfile.published(), Path("r"), Path("p"))
    assert "k-123" not in " ".join(benchy.command(call))


def _run_cancelled_after(server, tokenizer_json, streams: int):
    """Run TWO_TESTS and cancel once ``streams`` streams have finished on the fake server."""
    runner = BenchRunner(request(server, tokenizer_json, TWO_TESTS))
    canceller = threading.Thread(target=lambda: server.wait_streams_finished(streams) and runner.cancel())
    canceller.start()
    try:
        return runner.run()
    finally:
        canceller.join()


def test_cancel_halfway_keeps_the_finished_test_as_partial(make_fake, tokenizer_json):
    server = make_fake(token_delay_s=0.02)
    # Streams: warmup + 3 runs of tg 16, then the warmup of tg 32: cancel during tg 32's first run.
    outcome = _run_cancelled_after(server, tokenizer_json, PREFLIGHT_STREAMS + 5)

    assert outcome.cancelled and outcome.status == "partial"
    assert [r.response_size for r in measured_rows(outcome.result)] == [16]
    assert outcome.error.startswith("cancelled after 3 of 6 measured requests")
    assert "the 1 finished test(s) are kept" in outcome.error
    assert outcome.progress.requests_done == 3 and outcome.progress.fraction < 1.0


def test_cancel_before_any_test_finished_keeps_the_counts(make_fake, tokenizer_json):
    server = make_fake(token_delay_s=0.02)
    # Cancel once the first measured request is known to be done (its progress event was read): counting
    # the server's finished streams instead races llama-benchy's own report of that request.
    runner = BenchRunner(request(server, tokenizer_json, TWO_TESTS),
                         on_progress=lambda p: runner.cancel() if p.requests_done >= 1 else None)
    outcome = runner.run()
    assert outcome.status == "partial" and measured_rows(outcome.result) == []
    assert outcome.progress.requests_done >= 1
    assert "no test had finished" in outcome.error


def test_cancel_before_the_start_measures_nothing(fake_server, tokenizer_json):
    runner = BenchRunner(request(fake_server, tokenizer_json, TINY))
    runner.cancel()
    with pytest.raises(BenchCancelledError, match="before it started; nothing was measured"):
        runner.run()
    assert not any(r.get("stream") and r.get("max_tokens") != 1 for r in fake_server.counters.requests)


def test_ctrl_c_in_the_caller_stops_llama_benchy_cleanly(make_fake, tokenizer_json):
    server = make_fake(token_delay_s=0.02)

    pressed = []

    def interrupt(progress):
        if second_test_began(progress, "pp128 tg32") and not pressed:
            pressed.append(True)
            raise KeyboardInterrupt  # what a terminal's Ctrl-C raises in the CLI's main thread

    outcome = BenchRunner(request(server, tokenizer_json, TWO_TESTS), on_progress=interrupt).run()
    assert outcome.cancelled and outcome.status == "partial"
    assert [r.response_size for r in measured_rows(outcome.result)] == [16]


def test_a_broken_engine_fails_with_its_error(make_fake, tokenizer_json):
    server = make_fake(fail_streams=True)
    outcome = BenchRunner(request(server, tokenizer_json, TINY)).run()
    assert outcome.status == "failed"
    assert outcome.error.startswith("the benchmark produced no figures: 1 request(s): HTTP 500")
    assert "the fake engine is broken" in outcome.error


def test_an_engine_that_breaks_midway_gives_a_partial_result(make_fake, tokenizer_json):
    server = make_fake(fail_after_streams=PREFLIGHT_STREAMS + 2)  # tg 16's warmup and run work; tg 32 fails
    profile = BenchProfile.build(pp=(64,), tg=(16, 32), runs=1)
    outcome = BenchRunner(request(server, tokenizer_json, profile)).run()
    assert outcome.status == "partial"
    assert [r.response_size for r in measured_rows(outcome.result)] == [16]
    assert outcome.error.startswith("only 1 of 2 tests have figures; requests failed: 1 request(s): HTTP 500")
    assert outcome.error.endswith("check the endpoint's log, then run the benchmark again")


def test_a_server_that_drops_streamed_connections_gets_one_per_request(make_fake, tokenizer_json):
    server = make_fake(close_after_stream=True)
    profile = BenchProfile.build(pp=(64,), tg=(8,), runs=5)
    outcome = BenchRunner(request(server, tokenizer_json, profile)).run()
    assert outcome.preflight.facts.closes_after_stream is True
    assert outcome.status == "complete" and outcome.progress.errors == 0, outcome.error
    assert any("one connection per request" in w for w in outcome.warnings)


def test_a_failing_progress_view_does_not_stop_the_benchmark(fake_server, tokenizer_json):
    def broken(progress):
        raise RuntimeError("the view is broken")

    outcome = BenchRunner(request(fake_server, tokenizer_json, TINY), on_progress=broken).run()
    assert outcome.status == "complete", outcome.error


def test_another_llama_benchy_version_is_refused(monkeypatch, fake_server, tokenizer_json):
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: "0.3.9" if name == "llama-benchy" else real(name))
    expected = r"llama-benchy 0.3.9 is installed.*pip install llama-benchy==0.4.0"
    with pytest.raises(BenchToolError, match=expected):
        BenchRunner(request(fake_server, tokenizer_json, BenchProfile.published())).run()
    assert fake_server.counters.requests == []


def test_a_missing_llama_benchy_says_how_to_install_it(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    with pytest.raises(BenchToolError, match=r"not installed.*sparksync\[bench\]"):
        benchy.installed_version()
