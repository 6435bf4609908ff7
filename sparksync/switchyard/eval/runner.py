"""Play a case file against one target at a fixed concurrency, and measure it.

A target is a model name on the gateway: ``switchyard`` (routed by the
policy), or a pool's name (that pool alone, through the same gateway, so the
comparison carries the same overhead on every side). Answers come whole or
streamed (``stream``); a streamed answer is assembled from its chunks, as the
cascade does, and its time to first token is kept.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sparksync.switchyard.answer import Answer, StreamAssembler, from_completion
from sparksync.switchyard.eval.cases import Case, CaseFile
from sparksync.switchyard.eval.scoring import CaseScore, score_case
from sparksync.switchyard.sse import SseScanner, StreamStats, load_payload

if TYPE_CHECKING:  # httpx loads with the first run: reading stored reports (the app) does without it
    import httpx

DEFAULT_MAX_TOKENS = 256
REQUEST_TIMEOUT_S = 600.0
# Scores should not depend on sampling: BFCL's own runner asks for 0.001.
TEMPERATURE = 0.0


@dataclass(frozen=True)
class Target:
    label: str  # "gateway", "large only", "small only"
    model: str


@dataclass
class CaseRun:
    score: CaseScore
    pool: str | None
    output_tokens: int
    latency_s: float
    error: str | None = None
    category: str | None = None
    ttft_s: float | None = None  # streamed answers only


@dataclass
class TargetRun:
    target: Target
    runs: list[CaseRun] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def score(self) -> float:
        """0-100."""
        return 100.0 * sum(r.score.score for r in self.runs) / len(self.runs) if self.runs else 0.0

    @property
    def output_tokens(self) -> int:
        return sum(r.output_tokens for r in self.runs)

    @property
    def errors(self) -> int:
        return sum(1 for r in self.runs if r.error)

    def share(self) -> dict[str, float]:
        pools = Counter(r.pool for r in self.runs if r.pool)
        total = sum(pools.values())
        return {pool: n / total for pool, n in sorted(pools.items())} if total else {}

    def categories(self) -> dict[str, float]:
        """0-100 per category, for the cases that have one."""
        scores: dict[str, list[float]] = {}
        for run in self.runs:
            if run.category:
                scores.setdefault(run.category, []).append(run.score.score)
        return {name: 100.0 * sum(values) / len(values) for name, values in scores.items()}


def request_body(cases: CaseFile, case: Case, model: str, max_tokens: int, stream: bool = False) -> dict:
    body: dict = {
        "model": model,
        "messages": case.messages,
        "max_tokens": case.max_tokens or max_tokens,
        "temperature": TEMPERATURE,
    }
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    tools = cases.tools_of(case)
    if tools:
        body["tools"] = [t.model_dump(mode="json") for t in tools]
    if case.tool_choice is not None:
        body["tool_choice"] = case.tool_choice
    return body


async def run_target(
    client: httpx.AsyncClient,
    url: str,
    cases: CaseFile,
    target: Target,
    concurrency: int,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    stream: bool = False,
) -> TargetRun:
    gate = asyncio.Semaphore(concurrency)
    run_case = _stream_case if stream else _run_case

    async def one(case: Case) -> CaseRun:
        async with gate:
            return await run_case(client, url, cases, case, target.model, max_tokens)

    started = time.monotonic()
    runs = await asyncio.gather(*(one(c) for c in cases.cases))
    return TargetRun(target, list(runs), time.monotonic() - started)


async def _run_case(
    client: httpx.AsyncClient, url: str, cases: CaseFile, case: Case, model: str, max_tokens: int
) -> CaseRun:
    import httpx

    started = time.monotonic()
    try:
        response = await client.post(
            f"{url}/v1/chat/completions",
            json=request_body(cases, case, model, max_tokens),
            timeout=REQUEST_TIMEOUT_S,
        )
    except httpx.HTTPError as exc:
        return _failed(case, started, f"{type(exc).__name__}: {exc}")
    latency = time.monotonic() - started
    if response.status_code != 200:
        return _failed(case, started, f"HTTP {response.status_code}: {response.text[:200]}")
    try:
        answer = from_completion(response.json())
    except (ValueError, json.JSONDecodeError):
        return _failed(case, started, "the answer is not JSON")
    return CaseRun(
        score_case(cases, case, answer),
        response.headers.get("x-switchyard-pool"),
        _tokens(answer),
        latency,
        category=case.category,
    )


async def _stream_case(
    client: httpx.AsyncClient, url: str, cases: CaseFile, case: Case, model: str, max_tokens: int
) -> CaseRun:
    import httpx

    started = time.monotonic()
    stats, scanner, assembler = StreamStats(started), SseScanner(), StreamAssembler()
    body = request_body(cases, case, model, max_tokens, stream=True)
    try:
        async with client.stream(
            "POST", f"{url}/v1/chat/completions", json=body, timeout=REQUEST_TIMEOUT_S
        ) as response:
            if response.status_code != 200:
                text = (await response.aread()).decode("utf-8", "replace")
                return _failed(case, started, f"HTTP {response.status_code}: {text[:200]}")
            pool = response.headers.get("x-switchyard-pool")
            async for chunk in response.aiter_bytes():
                stats.feed(chunk)
                for payload in scanner.feed(chunk):
                    parsed = load_payload(payload)
                    if parsed is not None and isinstance(parsed.get("error"), dict):
                        return _failed(case, started, f"the stream ended with an error: {parsed['error']}")
                    if parsed is not None:
                        assembler.feed(parsed)
    except httpx.HTTPError as exc:
        return _failed(case, started, f"{type(exc).__name__}: {exc}")
    stats.finish()
    answer = assembler.finish()
    return CaseRun(
        score_case(cases, case, answer),
        pool,
        answer.completion_tokens or stats.output_tokens,
        time.monotonic() - started,
        category=case.category,
        ttft_s=stats.ttft_s,
    )


def _tokens(answer: Answer) -> int:
    return answer.completion_tokens or 0


def _failed(case: Case, started: float, error: str) -> CaseRun:
    return CaseRun(
        CaseScore(case.id, 0.0, notes=[error]), None, 0, time.monotonic() - started, error, case.category
    )
