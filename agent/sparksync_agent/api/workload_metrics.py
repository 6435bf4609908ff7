"""``sparksync_workload_*`` gauges: each running rank's tokens/s, loss and step, from the latest sample."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from sparksync_agent.protocol import Sample

LABELS = ["workload", "process", "group", "rank", "role"]
FIGURES = [
    ("workload_decode_tokens_per_second", "decode_tps", "Generated tokens per second (training: tokens/s)"),
    ("workload_prefill_tokens_per_second", "prefill_tps", "Prompt tokens processed per second"),
    ("workload_loss", "loss", "Training loss from the rank's log"),
    ("workload_step", "step", "Training step from the rank's log"),
]


def workload_metrics(sample: Sample) -> Iterator[Metric]:
    figures = sample.workloads or []
    ready = GaugeMetricFamily(
        "sparksync_workload_ready", "1 when the rank passed its readiness probe", labels=LABELS
    )
    for rank in figures:
        ready.add_metric(_labels(rank), 1 if rank.state.value == "ready" else 0)
    yield ready
    for name, attr, doc in FIGURES:
        gauge = GaugeMetricFamily(f"sparksync_{name}", doc, labels=LABELS)
        for rank in figures:
            value = getattr(rank, attr)
            if value is not None:  # unknown is left out, never exported as 0
                gauge.add_metric(_labels(rank), value)
        yield gauge


def _labels(rank) -> list[str]:
    return [rank.workload_id, rank.name, rank.group, str(rank.rank), rank.role]
