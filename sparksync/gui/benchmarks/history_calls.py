"""The blocking history calls the Benchmarks tab makes, run in workers (no Qt here).

Each opens its own ``HistoryStore`` (one connection per call), so several
may run at once from different threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sparksync.core.bench import (
    BenchInputError,
    BenchProfile,
    BenchRequest,
    Comparison,
    Endpoint,
    Exportable,
    Format,
    HistoryStore,
    RunListItem,
    RunRecord,
    ScalingReport,
    compare_runs,
    default_history_path,
    export_file,
    scaling_report,
)

LIST_LIMIT = 1000  # the newest runs listed; older ones stay in the file and the CLI


def list_runs(path: Path | None, limit: int = LIST_LIMIT) -> list[RunListItem]:
    return HistoryStore(path).list_runs(limit)


def get_run(path: Path | None, run_id: int) -> RunRecord:
    return HistoryStore(path).get(run_id)


def scaling_of(path: Path | None, run_ids: Sequence[int]) -> ScalingReport:
    """The report of the chosen runs; one chosen run from a sweep stands for its whole sweep."""
    store = HistoryStore(path)
    records = store.get_many(run_ids)
    if len(records) == 1:
        sweep = records[0].context.sweep_id
        if sweep is None:
            raise BenchInputError("a scaling chart needs runs at several sizes: pick a run of a scale sweep "
                                  "(`sparksync bench scale`), or select runs of one model at 1, 2, 4 and 8 nodes")
        records = store.get_many([item.id for item in store.list_runs(sweep_id=sweep)])
    return scaling_report(records)


def comparison_of(path: Path | None, a: int, b: int) -> Comparison:
    store = HistoryStore(path)
    return compare_runs(store.get(a), store.get(b))


def has_last_run(path: Path | None) -> bool:
    """Whether ``last_request`` has a run to repeat (an inference run is stored)."""
    if not (path or default_history_path()).exists():
        return False  # asking must not create the file
    return bool(HistoryStore(path).list_runs(1, kind="inference"))


def last_request(path: Path | None) -> BenchRequest:
    """The newest inference run's request again: same endpoint, model, tokenizer, profile and setting.

    The API key is never stored, so an endpoint that needs one is run from the dialog instead.
    """
    store = HistoryStore(path)
    newest = store.list_runs(1, kind="inference")
    if not newest:
        raise BenchInputError("no benchmark has run yet; run one with Run benchmark… first")
    record = store.get(newest[0].id)
    if not record.endpoint or not record.details.tokenizer:
        raise BenchInputError(f"run {record.id} does not say its endpoint or tokenizer; run it from the dialog")
    context = record.context.model_copy(update={"telemetry": None, "sweep_id": None})
    return BenchRequest(Endpoint.parse(record.endpoint), record.model, Path(record.details.tokenizer),
                        record.profile or BenchProfile.published(), context=context)


def export(subject: Exportable, fmt: Format, path: Path) -> Path:
    return export_file(subject, fmt, path)
