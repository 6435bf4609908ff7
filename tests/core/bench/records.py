"""Stored-run builders for tests: llama-benchy-shaped results without running llama-benchy."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sparksync.core.bench.context import RunContext
from sparksync.core.bench.profile import BenchProfile
from sparksync.core.bench.record import RunRecord
from sparksync.core.bench.results import summarize

T0 = datetime(2026, 10, 22, 12, 0, tzinfo=timezone.utc)


def metric(mean: float, n: int = 3) -> dict:
    return {"mean": mean, "std": mean * 0.01, "values": [mean] * n}


def benchy_result(tests: list[tuple[int, int, float, float, float]], model: str = "qwen") -> dict:
    """llama-benchy 0.4.0's JSON for tests given as (pp, tg, decode tok/s, prefill tok/s, TTFT ms)."""
    return {
        "version": "0.4.0", "timestamp": "2026-10-22 12:00:00Z", "latency_mode": "api", "latency_ms": 0.5,
        "model": model, "prefix_caching_enabled": False, "max_concurrency": 1,
        "benchmarks": [{
            "concurrency": 1, "context_size": 0, "prompt_size": pp, "response_size": tg,
            "is_context_prefill_phase": False,
            "pp_throughput": metric(prefill), "pp_req_throughput": metric(prefill),
            "tg_throughput": metric(decode), "tg_req_throughput": metric(decode),
            "peak_throughput": metric(decode * 1.02), "peak_req_throughput": metric(decode * 1.02),
            "ttfr": metric(ttft), "est_ppt": metric(ttft - 0.5), "e2e_ttft": metric(ttft),
            "throughput_over_time": None, "requests_throughput_over_time": None,
        } for pp, tg, decode, prefill, ttft in tests],
    }


def inference_run(size: int, decode: float, prefill: float, ttft: float = 100.0, *, model: str = "qwen",
                  status: str = "complete", minutes: int = 0, profile: BenchProfile | None = None,
                  **context) -> RunRecord:
    profile = profile or BenchProfile.published()
    result = benchy_result([(profile.pp[0], profile.tg[0], decode, prefill, ttft)], model)
    return RunRecord(created_at=T0 + timedelta(minutes=minutes), status=status, model=model,
                     endpoint="http://127.0.0.1:8080/v1", profile=profile,
                     context=RunContext(cluster_size=size, **context), benchy_version="0.4.0",
                     summary=summarize(result), result=result)
