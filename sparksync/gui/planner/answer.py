"""The planner's whole answer for the tab, in one call (no Qt): fit per cluster size and speed bounds.

For each size from 1 to the cluster's node count: whether the model fits
(with the margin on the tightest node), and the decode and prefill bounds
(memory bandwidth plus the split's traffic: tensor parallel, layer split or
replicas; compute) at the chosen context. The method is the planner's own (docs/planner.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sparksync.core.planner import (
    FitOptions,
    FitReport,
    Hardware,
    ModelSpec,
    NodeMemory,
    Split,
    decode_bound,
    plan_fit,
    prefill_bound,
    read_model,
    split_label,
)
from sparksync.core.planner import GB, PlanInputError, plan_on


@dataclass(frozen=True)
class SizeRow:
    nodes: int
    fits: bool
    needed_bytes_per_node: float
    margin_bytes: float
    tensor_parallel_ok: bool | None
    decode_tps: float | None  # None: the model's shape is too little known for this size
    prefill_tps: float | None
    bound_model: str = ""  # the split the bounds assume at this size ("TP×8", "layers×2", ...)


@dataclass(frozen=True)
class PlannerAnswer:
    model: ModelSpec
    report: FitReport
    rows: list[SizeRow]
    hardware: Hardware
    notes: list[str]


def answer(model: ModelSpec, cluster: list[NodeMemory], options: FitOptions, hardware: Hardware,
           prompt_tokens: int = 8192, split: Split = "tensor") -> PlannerAnswer:
    report = plan_fit(model, cluster, options)
    notes: list[str] = []
    rows = [_row(model, cluster, options, hardware, n, prompt_tokens, notes, split)
            for n in range(1, len(cluster) + 1)]
    return PlannerAnswer(model, report, rows, hardware, notes)


def answer_for_file(path: Path, cluster: list[NodeMemory], options: FitOptions, hardware: Hardware,
                    prompt_tokens: int = 8192, split: Split = "tensor") -> PlannerAnswer:
    """The same, with the model's numbers read from its GGUF or safetensors files (I/O: call in a worker)."""
    return answer(read_model(path), cluster, options, hardware, prompt_tokens, split)


def _row(model: ModelSpec, cluster: list[NodeMemory], options: FitOptions, hardware: Hardware, nodes: int,
         prompt_tokens: int, notes: list[str], split: Split = "tensor") -> SizeRow:
    plan = plan_on(model, cluster, options, nodes)
    decode = _bound(notes, lambda: decode_bound(model, nodes, hardware, context=options.context,
                                                batch=options.concurrency, kv_dtype=options.kv_dtype, split=split))
    prefill = _bound(notes, lambda: prefill_bound(model, nodes, hardware, prompt_tokens=prompt_tokens,
                                                  batch=options.concurrency, split=split))
    return SizeRow(nodes, plan.fits, plan.needed_bytes_per_node, plan.margin_bytes, plan.tensor_parallel_ok,
                   decode, prefill, split_label(split, nodes))


def _bound(notes: list[str], compute) -> float | None:
    """A bound's tokens/s; a missing model figure becomes a note (once) rather than no answer at all."""
    try:
        return compute().tokens_per_second
    except PlanInputError as exc:
        if str(exc) not in notes:
            notes.append(str(exc))
        return None


def verdict(result: PlannerAnswer) -> str:
    """One sentence: how many nodes it needs, with the margin, or why it does not fit."""
    report, cluster = result.report, result.report.cluster
    name = result.model.name or "The model"
    if report.nodes_needed is None:
        short = -report.checked.margin_bytes / GB
        return (f"{name} does not fit on these {len(cluster)} node(s): each would need {short:,.1f} GB more "
                "free memory. Use a smaller quantisation or context, or add nodes.")
    margin = report.checked.margin_bytes / GB
    tp = ""
    if report.tensor_parallel_nodes not in (None, report.nodes_needed):
        tp = f" (tensor parallel needs {report.tensor_parallel_nodes}, which splits the heads evenly)"
    return (f"{name} fits on {report.nodes_needed} of {len(cluster)} node(s){tp}, with {margin:,.1f} GB "
            "to spare on the tightest node.")
