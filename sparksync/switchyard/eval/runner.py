"""Play a case file against one target at a fixed concurrency, and measure it.

A target is a model name on the gateway: ``switchyard`` (routed by the
policy), or a pool's name (that pool alone, through the same gateway, so the
comparison carries the same overhead on every side).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from sparksync.switchyard.answer import Answer, from_completion
from sparksync.switchyard.eval.cases import Case, CaseFile
from sparksync.switchyard.eval.scoring import CaseScore, score_case

DEFAULT_MAX_TOKENS = 256
REQUEST_TIMEOUT_S = 600.0


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


def request_body(cases: CaseFile, case: Case, model: str, max_tokens: int) -> dict:
    body: dict = {"model": model, "messages": case.messages, "max_tokens": case.max_tokens or max_tokens}
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
) -> TargetRun:
    gate = asyncio.Semaphore(concurrency)

    async def one(case: Case) -> CaseRun:
        async with gate:
            return await _run_case(client, url, cases, case, target.model, max_tokens)

    started = time.monotonic()
    runs = await asyncio.gather(*(one(c) for c in cases.cases))
    return TargetRun(target, list(runs), time.monotonic() - started)


async def _run_case(
    client: httpx.AsyncClient, url: str, cases: CaseFile, case: Case, model: str, max_tokens: int
) -> CaseRun:
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
        score_case(cases, case, answer), response.headers.get("x-switchyard-pool"), _tokens(answer), latency
    )


def _tokens(answer: Answer) -> int:
    return answer.completion_tokens or 0


def _failed(case: Case, started: float, error: str) -> CaseRun:
    return CaseRun(CaseScore(case.id, 0.0, notes=[error]), None, 0, time.monotonic() - started, error)
