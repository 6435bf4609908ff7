"""Turning what a run produced into a history record, and storing it.

Inference records come from a llama-benchy outcome; training records from
the tokens/s a training workload reported (nanochat's ``tok/sec``), so the
same scaling report covers both.
"""

from __future__ import annotations

import logging
from typing import Any

from sparksync.core.bench.bounds import RunBounds, find_model_spec, run_bounds
from sparksync.core.bench.context import RunContext
from sparksync.core.bench.history import HistoryStore
from sparksync.core.bench.prompt_source import DEFAULT_PROMPT_FILE
from sparksync.core.bench.record import RunDetails, RunRecord, Status
from sparksync.core.bench.results import RunSummary, measured_rows, summarize
from sparksync.core.bench.runner import BenchOutcome, BenchRequest, BenchRunner
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.planner.bounds import split_for_engine

log = logging.getLogger(__name__)


def inference_record(request: BenchRequest, outcome: BenchOutcome) -> RunRecord:
    bounds, bounds_note = _bounds(request, outcome)
    summary = with_headline_bound(summarize(outcome.result), bounds, outcome.result)
    return RunRecord(
        created_at=outcome.started_at,
        kind="inference",
        status=outcome.status,
        model=request.model,
        endpoint=request.endpoint.base_url,
        profile=request.profile,
        context=request.context,
        benchy_version=outcome.benchy_version,
        summary=summary,
        error=outcome.error,
        bounds=bounds,
        details=RunDetails(
            warnings=outcome.warnings + ([bounds_note] if bounds_note else []),
            server=outcome.preflight.facts,
            requests_done=outcome.progress.requests_done,
            requests_total=outcome.progress.requests_total,
            duration_s=round(outcome.duration_s, 3),
            tokenizer=str(request.tokenizer),
            prompt_file=None if request.prompt_file == DEFAULT_PROMPT_FILE else str(request.prompt_file),
            # Only a failed run keeps llama-benchy's words: they explain what went wrong.
            log_tail=outcome.log_tail if outcome.status == "failed" else None,
        ),
        result=outcome.result,
    )


def _bounds(request: BenchRequest, outcome: BenchOutcome) -> tuple[RunBounds | None, str | None]:
    """The planner's bounds for the run's tests; a problem is a note, never a lost run."""
    try:
        spec, missing = find_model_spec(request.model_file, request.tokenizer,
                                        outcome.preflight.facts.model_path, request.endpoint.base_url)
        if spec is None:
            return None, missing
        context = request.context
        # llama.cpp over several nodes is its RPC backend: a layer split (the server says "llamacpp").
        split = split_for_engine(context.engine or outcome.preflight.facts.owned_by, context.cluster_size)
        return run_bounds(spec, request.profile, context.cluster_size, request.hardware, split=split), None
    except SparkSyncError as exc:
        log.warning("benchmark bounds: %s", exc)
        return None, f"no bound: {exc}"


def with_headline_bound(summary: RunSummary, bounds: RunBounds | None, result: dict | None) -> RunSummary:
    """The bound of the test the headline figures come from (the first one measured)."""
    if bounds is None:
        return summary
    rows = measured_rows(result)
    bound = bounds.for_test(rows[0].key) if rows else bounds.headline
    if bound is None:
        return summary
    return summary.model_copy(update={"decode_bound_tps": bound.decode_tps, "prefill_bound_tps": bound.prefill_tps})


def training_record(model: str, tokens_per_second: float | None, context: RunContext,
                    status: Status = "complete", result: dict[str, Any] | None = None,
                    error: str | None = None) -> RunRecord:
    """A training run at ``context.cluster_size`` nodes; ``result`` is the workload's own figures."""
    return RunRecord(
        kind="training",
        status=status,
        model=model,
        context=context,
        summary=RunSummary(train_tps=tokens_per_second),
        error=error,
        result={"tokens_per_second": tokens_per_second, **(result or {})},
    )


def store(history: HistoryStore, record: RunRecord) -> RunRecord:
    """Store ``record`` and return it with its new id."""
    return record.model_copy(update={"id": history.add(record)})


def with_engine_from_server(record: RunRecord, outcome: BenchOutcome) -> RunRecord:
    """The engine and its version as the server reports them (llama.cpp's build), as `bench run` records."""
    facts, ctx = outcome.preflight.facts, record.context
    updates = {}
    if ctx.engine_version is None and facts.build_info:
        updates["engine_version"] = facts.build_info
    if ctx.engine is None and facts.owned_by:
        updates["engine"] = facts.owned_by
    return record.model_copy(update={"context": ctx.model_copy(update=updates)}) if updates else record


def run_and_store(runner: BenchRunner, history: HistoryStore) -> RunRecord:
    """Run one benchmark and store it as ``sparksync bench run`` and the Benchmarks panel both do.

    The record holds the planner's bounds, the engine the server names and
    the telemetry of the run's time window; a run that did not complete is
    stored all the same (partial or failed), so its status says what happened.
    """
    from sparksync.core.bench.run_telemetry import with_run_telemetry  # numpy: only once a run ends

    outcome = runner.run()
    record = with_engine_from_server(inference_record(runner.request, outcome), outcome)
    return store(history, with_run_telemetry(record))
