"""StreamStats: TTFT and the token count, read from the bytes of a stream as they pass."""

from __future__ import annotations

import json

from sparksync.switchyard.sse import StreamStats


def event(payload: dict | str) -> bytes:
    return b"data: " + (payload if isinstance(payload, str) else json.dumps(payload)).encode() + b"\n\n"


def token(text: str = "hi") -> bytes:
    return event({"choices": [{"index": 0, "delta": {"content": text}}]})


def counted(*pieces: bytes) -> int:
    stats = StreamStats(0.0)
    for piece in pieces:
        stats.feed(piece)
    stats.finish()
    return stats.output_tokens


END = event({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}) + event("[DONE]")


def test_the_engines_usage_counts_wherever_it_lands_in_the_tail():
    usage = event({"choices": [], "usage": {"completion_tokens": 41}})
    assert counted(token(), token(), usage + END) == 41
    assert counted(token() + token() + usage + token() + END) == 41  # all in one piece
    # Pieces split anywhere, even inside the usage event.
    whole = token() + token() + usage + END
    cut = whole.index(b'"usage"') + 3
    assert counted(whole[:cut], whole[cut:]) == 41


def test_timings_count_when_there_is_no_usage_and_usage_wins_over_them():
    timings = event({"choices": [], "timings": {"predicted_n": 17}})
    both = event({"choices": [], "timings": {"predicted_n": 17}, "usage": {"completion_tokens": 18}})
    assert counted(token(), timings + END) == 17
    assert counted(token(), both + END) == 18
    usage_then_timings = event({"usage": {"completion_tokens": 9}}) + timings
    assert counted(token(), usage_then_timings + END) == 9


def test_without_reported_counts_each_output_event_is_a_token():
    assert counted(token(), token(), token() + END) == 3
    # The words in a token's text, or in a comment line, are not counts.
    assert counted(token('"usage"'), b': "timings" are coming\n', token() + END) == 2
