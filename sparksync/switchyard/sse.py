"""Server-sent events, read incrementally from the raw bytes a replica streams.

The relay forwards the bytes untouched; this only watches them go by, so it
must be cheap: a line split per chunk, and JSON parsing only where needed.
"""

from __future__ import annotations

import json
import re
import time
from collections import deque
from typing import Any

DONE = b"[DONE]"
# The closing chunk of a choice names why it ended; it carries no output.
_FINISHED = re.compile(rb'"finish_reason":\s*"')


class SseScanner:
    """Splits a byte stream into the payloads of its ``data:`` lines."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        if b"\n" not in chunk:
            self._pending += chunk
            return []
        *lines, self._pending = (self._pending + chunk).split(b"\n")
        return [line[5:].strip() for line in lines if line.startswith(b"data:")]


def _marked_payloads(data: bytes, markers: tuple[bytes, ...]) -> list[bytes]:
    """The ``data:`` payloads of the lines of ``data`` that hold any of ``markers``, in order.

    The lines are found around each marker, not by splitting ``data``: an
    answer's tail holds many events and one or two of them the counts.
    """
    starts: set[int] = set()
    for marker in markers:
        at = data.find(marker)
        while at != -1:
            starts.add(data.rfind(b"\n", 0, at) + 1)
            end = data.find(b"\n", at)
            at = -1 if end == -1 else data.find(marker, end)
    payloads = []
    for start in sorted(starts):
        end = data.find(b"\n", start)
        line = data[start:] if end == -1 else data[start:end]
        if line.startswith(b"data:"):
            payloads.append(line[5:].strip())
    return payloads


def load_payload(payload: bytes) -> dict[str, Any] | None:
    if payload == DONE:
        return None
    try:
        value = json.loads(payload)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def has_output(chunk: dict[str, Any]) -> bool:
    """Whether a chunk carries generated output (not just the role or the end)."""
    for choice in chunk.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        if isinstance(delta, dict):
            if delta.get("content") or delta.get("tool_calls") or delta.get("reasoning_content"):
                return True
        elif choice.get("text"):
            return True
    return False


class StreamStats:
    """TTFT and output tokens of one stream, measured on the way through.

    Until the first output it parses every event (to see when output starts);
    after that it only counts ``data:`` lines and keeps the last few chunks,
    where engines report the exact token count (usage, or llama.cpp's timings).
    """

    TAIL_CHUNKS = 8

    def __init__(self, started: float):
        self.started = started
        self.first_output_at: float | None = None
        self.ended_at: float | None = None
        self._scanner = SseScanner()
        self._events = 0  # data lines since the first output, that one included
        self._tail: deque[bytes] = deque(maxlen=self.TAIL_CHUNKS)
        self._reported_tokens: int | None = None

    def feed(self, chunk: bytes) -> None:
        if self.first_output_at is not None:
            self._events += chunk.count(b"data:")
            self._tail.append(chunk)
            return
        payloads = self._scanner.feed(chunk)
        for i, payload in enumerate(payloads):
            parsed = load_payload(payload)
            if parsed is not None and has_output(parsed):
                self.first_output_at = time.monotonic()
                self._events = len(payloads) - i
                self._tail.append(chunk)
                return

    def finish(self) -> None:
        self.ended_at = time.monotonic()
        tail = b"".join(self._tail)
        for payload in _marked_payloads(tail, (b'"usage"', b'"timings"')):
            self._read_counts(load_payload(payload))
        # Closing events carry no output: [DONE] and each choice's finish chunk.
        self._events -= tail.count(DONE) + len(_FINISHED.findall(tail))

    def _read_counts(self, parsed: dict[str, Any] | None) -> None:
        if not parsed:
            return
        usage, timings = parsed.get("usage"), parsed.get("timings")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            self._reported_tokens = usage["completion_tokens"]
        elif isinstance(timings, dict) and isinstance(timings.get("predicted_n"), int):
            self._reported_tokens = self._reported_tokens or timings["predicted_n"]

    @property
    def output_tokens(self) -> int:
        """What the engine reported, else one per output event (how llama.cpp and vLLM stream)."""
        if self._reported_tokens is not None:
            return self._reported_tokens
        return max(self._events, 1) if self.first_output_at is not None else 0

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_output_at is None else self.first_output_at - self.started

    def decode_tokens_per_s(self) -> float | None:
        if self.first_output_at is None or self.ended_at is None or self.output_tokens < 2:
            return None
        span = self.ended_at - self.first_output_at
        return (self.output_tokens - 1) / span if span > 0 else None
