"""Benchmarks like the published ones: llama-benchy runs, their history, scaling reports.

Modules, in the order a run passes through them:

* profile.py: what to measure (the published preset, or custom values);
* preflight.py, endpoint.py: refuse bad input before measuring anything;
* benchy.py, prompt_source.py, progress.py, runner.py: run the pinned llama-benchy;
* recording.py, record.py, history.py: store the run in the client's SQLite history;
* results.py, report.py, exports.py, chart.py: read, compare and export the figures;
* scale.py: the same profile on 1, 2, 4 and 8 nodes, given a way to bring the model up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_exports

if TYPE_CHECKING:
    from sparksync.core.bench.benchy import (
        API_KEY_ENV,
    )
    from sparksync.core.bench.context import (
        MAX_CLUSTER_SIZE,
        RunContext,
    )
    from sparksync.core.bench.endpoint import (
        Endpoint,
        EndpointProbe,
    )
    from sparksync.core.bench.errors import (
        BenchCancelledError,
        BenchError,
        BenchInputError,
        BenchRunFailedError,
    )
    from sparksync.core.bench.exports import (
        Exportable,
        FORMATS,
        Format,
        Table,
        export_file,
        export_text,
        tables_of,
        to_markdown,
    )
    from sparksync.core.bench.history import (
        HistoryStore,
        default_history_path,
    )
    from sparksync.core.bench.profile import (
        BenchProfile,
        PUBLISHED,
    )
    from sparksync.core.bench.progress import (
        BenchProgress,
    )
    from sparksync.core.bench.prompt_source import (
        DEFAULT_PROMPT_FILE,
    )
    from sparksync.core.bench.record import (
        RunListItem,
        RunRecord,
    )
    from sparksync.core.bench.recording import (
        inference_record,
        run_and_store,
        store,
        with_engine_from_server,
    )
    from sparksync.core.bench.report import (
        Comparison,
        ScalingReport,
        compare_runs,
        scaling_report,
    )
    from sparksync.core.bench.run_telemetry import (
        with_run_telemetry,
    )
    from sparksync.core.bench.runner import (
        BenchRequest,
        BenchRunner,
    )
    from sparksync.core.bench.scale import (
        DEFAULT_SIZES,
        ScaleSweep,
    )
    from sparksync.core.bench.telemetry import (
        TelemetrySummary,
    )
    from sparksync.core.bench.workload_sweep import (
        SweepWorkload,
        WorkloadBringUp,
    )

_WHERE = {
    "API_KEY_ENV": "benchy",
    "MAX_CLUSTER_SIZE": "context",
    "RunContext": "context",
    "Endpoint": "endpoint",
    "EndpointProbe": "endpoint",
    "BenchCancelledError": "errors",
    "BenchError": "errors",
    "BenchInputError": "errors",
    "BenchRunFailedError": "errors",
    "Exportable": "exports",
    "FORMATS": "exports",
    "Format": "exports",
    "Table": "exports",
    "export_file": "exports",
    "export_text": "exports",
    "tables_of": "exports",
    "to_markdown": "exports",
    "HistoryStore": "history",
    "default_history_path": "history",
    "BenchProfile": "profile",
    "PUBLISHED": "profile",
    "BenchProgress": "progress",
    "DEFAULT_PROMPT_FILE": "prompt_source",
    "RunListItem": "record",
    "RunRecord": "record",
    "inference_record": "recording",
    "run_and_store": "recording",
    "store": "recording",
    "with_engine_from_server": "recording",
    "Comparison": "report",
    "ScalingReport": "report",
    "compare_runs": "report",
    "scaling_report": "report",
    "with_run_telemetry": "run_telemetry",
    "BenchRequest": "runner",
    "BenchRunner": "runner",
    "DEFAULT_SIZES": "scale",
    "ScaleSweep": "scale",
    "TelemetrySummary": "telemetry",
    "SweepWorkload": "workload_sweep",
    "WorkloadBringUp": "workload_sweep",
}
__all__ = [
    "API_KEY_ENV",
    "BenchCancelledError",
    "BenchError",
    "BenchInputError",
    "BenchProfile",
    "BenchProgress",
    "BenchRequest",
    "BenchRunFailedError",
    "BenchRunner",
    "Comparison",
    "DEFAULT_PROMPT_FILE",
    "DEFAULT_SIZES",
    "Endpoint",
    "EndpointProbe",
    "Exportable",
    "FORMATS",
    "Format",
    "HistoryStore",
    "MAX_CLUSTER_SIZE",
    "PUBLISHED",
    "RunContext",
    "RunListItem",
    "RunRecord",
    "ScaleSweep",
    "ScalingReport",
    "SweepWorkload",
    "Table",
    "TelemetrySummary",
    "WorkloadBringUp",
    "compare_runs",
    "default_history_path",
    "export_file",
    "export_text",
    "inference_record",
    "run_and_store",
    "scaling_report",
    "store",
    "tables_of",
    "to_markdown",
    "with_engine_from_server",
    "with_run_telemetry",
]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
