"""Live progress from llama-benchy's JSONL events (schema ``llama-benchy-progress.v1``).

llama-benchy writes one JSON object per line to the file named by
``--emit-progress``: a header, then per measured request ``request_start``,
``request_first_response``, ``request_first_token``, ``tokens`` (per chunk),
``request_end``, and finally ``bench_complete``. Warmup requests emit nothing,
so the measured requests of the profile are the denominator of the fraction.

:class:`ProgressTracker` turns the events into :class:`BenchProgress` values (fraction
done, live decode tokens/s) and keeps per-request facts the runner checks
afterwards (the server's prompt token counts).
"""

from __future__ import annotations

import json
import logging
from collections import deque
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

SCHEMA = "llama-benchy-progress.v1"
RATE_WINDOW_S = 1.0


@dataclass(frozen=True)
class BenchProgress:
    """One progress update, as the GUI's bar and tokens/s trace show it."""

    requests_done: int
    requests_total: int
    fraction: float
    tokens_per_second: float | None  # decode rate over the last second; None before the first token
    tokens_generated: int
    current_test: str | None
    errors: int
    finished: bool = False


@dataclass
class RequestStat:
    """What one measured request did, from its events."""

    request_id: int
    prompt_size: int
    context_size: int
    response_size: int
    tokens: int = 0
    server_prompt_tokens: int = 0
    decode_seconds: float = 0.0
    ttft_s: float | None = None
    error: str = ""
    done: bool = False

    @property
    def expected_prompt_tokens(self) -> int:
        return self.prompt_size + self.context_size


class ProgressTracker:
    """Folds progress events into a running picture of the suite."""

    def __init__(self, requests_total: int, window_s: float = RATE_WINDOW_S):
        self.requests_total = max(1, requests_total)
        self._window_s = window_s
        self._requests: dict[int, RequestStat] = {}
        self._token_events: deque[tuple[float, int]] = deque()
        self._latest_ts = 0.0
        self._current_test: str | None = None
        self.bench_status: str | None = None
        self.schema_ok = True

    def feed(self, event: dict) -> None:
        if event.get("schema") != SCHEMA:
            self._wrong_schema(event)
            return
        self._latest_ts = max(self._latest_ts, float(event.get("ts") or 0.0))
        handler = getattr(self, f"_on_{event.get('type')}", None)
        if handler is not None:
            handler(event)

    @property
    def requests(self) -> list[RequestStat]:
        return list(self._requests.values())

    def snapshot(self) -> BenchProgress:
        done = [r for r in self._requests.values() if r.done]
        partial = sum(min(1.0, r.tokens / max(1, r.response_size))
                      for r in self._requests.values() if not r.done)
        fraction = 1.0 if self.bench_status == "ok" else min(1.0, (len(done) + partial) / self.requests_total)
        return BenchProgress(
            requests_done=len(done),
            requests_total=self.requests_total,
            fraction=fraction,
            tokens_per_second=self._rate(),
            tokens_generated=sum(r.tokens for r in self._requests.values()),
            current_test=self._current_test,
            errors=sum(1 for r in done if r.error),
            finished=self.bench_status is not None,
        )

    # --- event handlers (named _on_<type>) ---

    def _on_request_start(self, e: dict) -> None:
        stat = RequestStat(int(e["request_id"]), int(e.get("prompt_size", 0)), int(e.get("context_size", 0)),
                           int(e.get("response_size", 0)))
        self._requests[stat.request_id] = stat
        self._current_test = _test_label(e)

    def _on_request_first_token(self, e: dict) -> None:
        stat = self._requests.get(int(e["request_id"]))
        if stat is not None:
            stat.ttft_s = float(e.get("ttft_s", 0.0))

    def _on_tokens(self, e: dict) -> None:
        count = int(e.get("count", 0))
        stat = self._requests.get(int(e["request_id"]))
        if stat is not None:
            stat.tokens += count
        self._token_events.append((float(e["ts"]), count))

    def _on_request_end(self, e: dict) -> None:
        stat = self._requests.get(int(e["request_id"]))
        if stat is None:
            return
        stat.done = True
        # request_end carries the reconciled count; the per-chunk ones may be estimates.
        stat.tokens = int(e.get("total_tokens", stat.tokens))
        stat.server_prompt_tokens = int(e.get("prompt_tokens", 0))
        stat.decode_seconds = float(e.get("decode_seconds", 0.0))
        stat.error = str(e.get("error") or "")

    def _on_bench_complete(self, e: dict) -> None:
        self.bench_status = str(e.get("status", "ok"))

    def _rate(self) -> float | None:
        if not self._token_events:
            return None
        while self._token_events and self._token_events[0][0] < self._latest_ts - self._window_s:
            self._token_events.popleft()
        if len(self._token_events) < 2:
            return 0.0
        first_ts = self._token_events[0][0]
        span = self._token_events[-1][0] - first_ts
        # Tokens after the first event arrived during the span; the first marks its start.
        tokens = sum(count for _, count in self._token_events) - self._token_events[0][1]
        return tokens / span if span > 0 else 0.0

    def _wrong_schema(self, event: dict) -> None:
        if self.schema_ok:
            log.warning("llama-benchy progress event with schema %r (expected %s); progress is not shown",
                        event.get("schema"), SCHEMA)
        self.schema_ok = False


def _test_label(e: dict) -> str:
    label = f"pp{e.get('prompt_size')} tg{e.get('response_size')}"
    if e.get("context_size"):
        label += f" @ d{e['context_size']}"
    return f"{label} c{e.get('concurrency', 1)} run {e.get('run_index', '?')}"


class JsonlFollower:
    """Reads the lines appended to a JSONL file since the last call.

    A line still being written (no newline yet) waits for the next call, so a
    half-written event is never parsed.
    """

    def __init__(self, path: Path):
        self._path = path
        self._offset = 0
        self._pending = b""

    def read_new(self) -> list[dict]:
        try:
            with open(self._path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return []  # llama-benchy has not opened it yet
        self._offset += len(chunk)
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()
        return [event for event in map(_parse_line, lines) if event is not None]


def _parse_line(line: bytes) -> dict | None:
    if not line.strip():
        return None
    try:
        event = json.loads(line)
    except ValueError:
        log.debug("skipping a progress line that is not JSON: %r", line[:200])
        return None
    return event if isinstance(event, dict) else None
