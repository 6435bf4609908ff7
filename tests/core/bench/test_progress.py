"""Progress from llama-benchy's JSONL events: the fraction done, the live tokens/s, the follower."""

from __future__ import annotations

import json

from sparksync.core.bench.progress import SCHEMA, JsonlFollower, ProgressTracker


def ev(kind: str, ts: float, **fields) -> dict:
    return {"schema": SCHEMA, "type": kind, "ts": ts, **fields}


def start(rid: int, ts: float, tg: int = 10, pp: int = 100, run: int = 1) -> dict:
    return ev("request_start", ts, request_id=rid, prompt_size=pp, response_size=tg, context_size=0,
              concurrency=1, run_index=run, model="m", base_url="u", target_label="")


def tokens(rid: int, ts: float, count: int = 1) -> dict:
    return ev("tokens", ts, request_id=rid, count=count, snippet="x", estimated=True)


def end(rid: int, ts: float, total: int = 10, prompt: int = 100, error: str = "") -> dict:
    return ev("request_end", ts, request_id=rid, total_tokens=total, prompt_tokens=prompt,
              decode_seconds=0.1, error=error)


def feed(tracker: ProgressTracker, events: list[dict]) -> None:
    for event in events:
        tracker.feed(event)


def test_fraction_counts_finished_requests_and_the_tokens_of_the_one_in_flight():
    tracker = ProgressTracker(requests_total=4)
    feed(tracker, [ev("header", 0.0, llama_benchy_version="0.4.0"), start(0, 1.0),
                   *[tokens(0, 1.0 + i * 0.01) for i in range(10)], end(0, 1.1), start(1, 1.2),
                   *[tokens(1, 1.2 + i * 0.01) for i in range(5)]])
    progress = tracker.snapshot()
    # One request done, the second half way (5 of 10 tokens): 1.5 of 4.
    assert progress.fraction == 1.5 / 4
    assert (progress.requests_done, progress.requests_total, progress.tokens_generated) == (1, 4, 15)
    assert progress.current_test == "pp100 tg10 c1 run 1"
    assert not progress.finished


def test_live_rate_is_the_tokens_of_the_last_second():
    tracker = ProgressTracker(requests_total=1)
    # 100 tokens/s for 3 s: one token every 10 ms.
    feed(tracker, [start(0, 0.0, tg=300), *[tokens(0, i * 0.01) for i in range(300)]])
    rate = tracker.snapshot().tokens_per_second
    assert rate is not None and abs(rate - 100.0) < 1e-6
    # Then a 2 s pause (the next prefill): nothing decodes, and the trace must show it.
    feed(tracker, [end(0, 3.0, total=300), start(1, 5.0, tg=300)])
    assert tracker.snapshot().tokens_per_second == 0.0


def test_no_rate_before_the_first_token():
    tracker = ProgressTracker(requests_total=1)
    tracker.feed(start(0, 0.0))
    assert tracker.snapshot().tokens_per_second is None


def test_request_end_carries_the_server_counts_and_errors():
    tracker = ProgressTracker(requests_total=2)
    feed(tracker, [start(0, 0.0), tokens(0, 0.1, count=3), end(0, 0.2, total=8, prompt=96),
                   start(1, 0.3), end(1, 0.4, total=0, prompt=0, error="HTTP 500: broken")])
    first, second = tracker.requests
    assert (first.tokens, first.server_prompt_tokens, first.expected_prompt_tokens) == (8, 96, 100)
    assert second.error == "HTTP 500: broken"
    assert tracker.snapshot().errors == 1


def test_bench_complete_ends_at_one_hundred_percent():
    tracker = ProgressTracker(requests_total=3)
    feed(tracker, [start(0, 0.0), end(0, 0.1), ev("bench_complete", 0.2, status="ok")])
    progress = tracker.snapshot()
    assert progress.finished and progress.fraction == 1.0


def test_events_of_another_schema_are_ignored(caplog):
    tracker = ProgressTracker(requests_total=1)
    tracker.feed({**start(0, 0.0), "schema": "llama-benchy-progress.v2"})
    assert tracker.requests == [] and tracker.schema_ok is False
    assert "llama-benchy-progress.v2" in caplog.text


def test_follower_returns_only_whole_new_lines(tmp_path):
    path = tmp_path / "progress.jsonl"
    follower = JsonlFollower(path)
    assert follower.read_new() == []  # not created yet
    first, second = start(0, 0.0), tokens(0, 0.1)
    path.write_bytes(json.dumps(first).encode() + b"\n" + json.dumps(second).encode()[:10])
    assert follower.read_new() == [first]
    with open(path, "ab") as f:
        f.write(json.dumps(second).encode()[10:] + b"\nnot json\n\n")
    assert follower.read_new() == [second]
    assert follower.read_new() == []
