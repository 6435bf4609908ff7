"""``sparksync plan ...``: will a model fit on the cluster, and how fast can it go.

    sparksync plan fit --params 753e9 --quant nvfp4 --weights-gb 470 --node-memory-gb 128 --nodes 3
    sparksync plan fit --model-file ~/models/qwen.gguf              # node memory from telemetry
    sparksync plan speed --params 27B --quant nvfp4 --layers 64 --kv-heads 8 --head-dim 128 \\
        --hidden 5120 --nodes 1 --nodes 8 --measured-decode 11.86 --measured-decode 52.58

The method and its assumptions are in docs/planner.md. ``--json`` prints the
planner's models (FitReport; or the speed rows) as one JSON document.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import click

from sparksync.core.fleet import Fleet, wait_first_sample
from sparksync.core.base import SparkSyncError
from sparksync.core.planner import (
    SPLITS,
    Hardware,
    ModelSpec,
    PlanInputError,
    decode_bound,
    percent_of_bound,
    prefill_bound,
    read_model,
    split_label,
    split_model,
)
from sparksync.core.planner import (
    DEFAULT_OVERHEAD_GB,
    GB,
    MAX_NODES,
    FitOptions,
    FitReport,
    NodeMemory,
    plan_fit,
    stated_cluster,
)
from sparksync.core.planner import KV_DTYPES

DEFAULT_OS_RESERVE_GB = 4.0  # ASSUMPTION: DGX OS with its desktop idle; telemetry needs none
_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


class Count(click.ParamType):
    """A positive count: 753e9, 753B, 27b, 1.5T, 70000000."""

    name = "count"

    def convert(self, value: Any, param, ctx) -> float:
        if isinstance(value, (int, float)):
            number = float(value)
        else:
            match = re.fullmatch(r"\s*([0-9.]+(?:e[0-9]+)?)\s*([kmbgt]?)\s*", str(value), re.IGNORECASE)
            if match is None:
                self.fail(f"{value!r} is not a count (examples: 753e9, 753B, 1.5T)", param, ctx)
            number = float(match.group(1)) * _SUFFIX[match.group(2).lower()]
        if number <= 0:
            self.fail(f"{value!r} must be more than 0", param, ctx)
        return number


COUNT = Count()
POSITIVE_INT = click.IntRange(min=1)
POSITIVE = click.FloatRange(min=0, min_open=True)


def _model_options(command):
    """The options that describe the model, shared by fit and speed."""
    options = [
        click.option("--name", help="A name for the model in the output."),
        click.option("--params", type=COUNT, help="Total parameters (753e9, 753B); all experts included."),
        click.option(
            "--quant", help="Quantisation: nvfp4, mxfp4, fp8, int8, int4, bf16, fp16, q4_k_m, q8_0 ..."
        ),
        click.option(
            "--model-file",
            type=click.Path(exists=True, path_type=Path),
            help="Read the numbers from a GGUF file or a safetensors folder (config.json).",
        ),
        click.option(
            "--weights-gb",
            type=POSITIVE,
            help="Exact weight size in GB, when known (overrides params x quant).",
        ),
        click.option("--active-params", type=COUNT, help="Parameters used per token (mixture of experts)."),
        click.option("--layers", type=POSITIVE_INT, help="Transformer layers."),
        click.option("--kv-heads", type=POSITIVE_INT, help="KV heads per layer."),
        click.option("--head-dim", type=POSITIVE_INT, help="Dimension of one head."),
        click.option("--hidden", type=POSITIVE_INT, help="Hidden size (the all-reduce message per token)."),
        click.option("--attention-heads", type=POSITIVE_INT, help="Query heads (default hidden / head dim)."),
        click.option("--kv-layers", type=POSITIVE_INT, help="Layers with a KV cache, for hybrid models."),
        click.option(
            "--mla-kv-dim", type=POSITIVE_INT, help="Latent attention: cached values per token per layer."
        ),
        click.option(
            "--kv-dtype",
            type=click.Choice(list(KV_DTYPES)),
            default="bf16",
            show_default=True,
            help="KV-cache element type.",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON document."),
    ]
    return functools.reduce(lambda cmd, option: option(cmd), reversed(options), command)


_SHAPE_KEYS = ("layers", "kv_heads", "head_dim", "hidden", "attention_heads", "kv_layers", "mla_kv_dim")


def build_model(values: dict[str, Any]) -> ModelSpec:
    """A ModelSpec from the model file (if any) with the explicit options on top."""
    fields: dict[str, Any] = {}
    if values.get("model_file") is not None:
        fields = read_model(values["model_file"]).model_dump(exclude_none=True)
    if values.get("params") is not None or values.get("quant") is not None:
        fields.pop("weight_bytes", None)  # the file's exact size no longer describes this model
    explicit = {k: values.get(k) for k in ("name", "params", "quant", "active_params", *_SHAPE_KEYS)}
    fields.update({k: v for k, v in explicit.items() if v is not None})
    if values.get("weights_gb") is not None:
        fields["weight_bytes"] = int(values["weights_gb"] * GB)
    missing = [f"--{k}" for k in ("params", "quant") if k not in fields]
    if missing:
        raise PlanInputError(f"the model needs {' and '.join(missing)} (or --model-file to read them).")
    return ModelSpec.build(**fields)


@click.group()
def plan() -> None:
    """Will a model fit on the cluster, and how fast can it go (docs/planner.md)."""


@plan.command("fit")
@_model_options
@click.option(
    "--nodes", type=click.IntRange(1, MAX_NODES), help="Check this many nodes (default: the fewest that fit)."
)
@click.option(
    "--node-memory-gb",
    type=POSITIVE,
    help="Memory of each node, e.g. 128 or 64. Default: read every node's free memory (telemetry).",
)
@click.option(
    "--os-reserve-gb",
    type=click.FloatRange(min=0),
    default=DEFAULT_OS_RESERVE_GB,
    show_default=True,
    help="Memory each node keeps for its OS, with --node-memory-gb.",
)
@click.option(
    "--context", type=POSITIVE_INT, default=8192, show_default=True, help="Tokens of context per sequence."
)
@click.option("--concurrency", type=POSITIVE_INT, default=1, show_default=True, help="Sequences at once.")
@click.option(
    "--overhead-gb",
    type=click.FloatRange(min=0),
    default=DEFAULT_OVERHEAD_GB,
    show_default=True,
    help="Runtime memory per node (CUDA context, activations, engine buffers).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=20.0,
    show_default=True,
    help="Seconds to wait for each node's telemetry.",
)
def fit(**values: Any) -> None:
    """How many nodes the model needs, and the memory margin left.

    \b
    Each node holds weights / N + its share of the KV cache + overhead; the
    model fits on N nodes when every one of them has that much free.
    Exits 0 when it fits, 1 when it does not (scripts can test it), 2 for bad input.
    """
    model = build_model(values)
    options = FitOptions(
        context=values["context"],
        concurrency=values["concurrency"],
        kv_dtype=values["kv_dtype"],
        overhead_bytes=values["overhead_gb"] * GB,
    )
    cluster = _cluster(values)
    report = plan_fit(model, cluster, options, values["nodes"])
    if values["as_json"]:
        click.echo(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        click.echo(format_fit(report))
    if not report.fits:
        raise SystemExit(DOES_NOT_FIT_EXIT)


DOES_NOT_FIT_EXIT = 1  # an answer, not an error: 2 stays "bad input"


def _cluster(values: dict[str, Any]) -> list[NodeMemory]:
    if values["node_memory_gb"] is not None:
        return stated_cluster(MAX_NODES, values["node_memory_gb"], values["os_reserve_gb"])
    return cluster_from_telemetry(values["timeout"])


def cluster_from_telemetry(timeout: float) -> list[NodeMemory]:
    """The cluster's real free memory (MemAvailable) per node, from each agent's latest sample.

    The cluster is the paired nodes, or this computer while none is paired.
    """
    cluster = []
    with Fleet() as fleet:
        for name in fleet.cluster():
            try:
                memory = fleet.call(name, lambda client: wait_first_sample(client, timeout)).latest.memory
            except SparkSyncError as exc:
                error = PlanInputError(
                    f"could not read {name}'s free memory: {exc} Or state it with --node-memory-gb."
                )
                error.exit_code = exc.exit_code  # keep "unreachable" distinct from "bad input"
                raise error from None
            if memory is None:
                raise PlanInputError(f"{name} reports no memory reading. State it with --node-memory-gb.")
            cluster.append(NodeMemory.from_sample(name, memory))
    return cluster


def format_fit(report: FitReport) -> str:
    model, checked = report.model, report.checked
    lines = [_model_line(model, report), _cluster_line(report.cluster)]
    if report.nodes_needed is None:
        lines.append(f"does NOT fit on all {len(report.cluster)} nodes of this cluster.")
    else:
        tp = report.tensor_parallel_nodes
        extra = (
            f"; {tp} for tensor parallelism (heads split evenly)" if tp and tp != report.nodes_needed else ""
        )
        lines.append(
            f"needs {report.nodes_needed} node{'s' * (report.nodes_needed > 1)} (the fewest that fit){extra}."
        )
    verdict = "fits" if checked.fits else "does NOT fit"
    lines.append(
        f"on {checked.nodes} node{'s' * (checked.nodes > 1)} it {verdict}: each needs "
        f"{_gb(checked.weights_bytes_per_node)} weights + {_gb(checked.kv_bytes_per_node)} KV cache + "
        f"{_gb(checked.overhead_bytes_per_node)} overhead = {_gb(checked.needed_bytes_per_node)}; "
        f"{_margin(checked.margin_bytes)} on the tightest node."
    )
    if any(n.source == "telemetry" for n in report.cluster):
        lines += [
            f"  {n.name}: {_gb(n.free_bytes)} free, {_margin(n.margin_bytes)}" for n in checked.placement
        ]
    lines += [f"warning: {w}" for w in report.warnings]
    return "\n".join(lines)


def _model_line(model: ModelSpec, report: FitReport) -> str:
    quant = model.quantisation
    kv = report.kv_cache_bytes
    kv_text = (
        "not counted"
        if kv is None
        else (f"{_gb(kv)} ({report.options.context:,} tokens x {report.options.concurrency})")
    )
    return (
        f"{model.name or 'model'}: {model.params / 1e9:,.1f} B params, {quant.name} "
        f"({quant.bytes_per_param:.4f} B/param), weights {_gb(report.weights_bytes)}, KV cache {kv_text}"
    )


def _cluster_line(cluster: list[NodeMemory]) -> str:
    node = cluster[0]
    if node.source == "stated":  # stated clusters are MAX_NODES identical nodes
        free = f"{_gb(node.free_bytes)} free after the OS reserve"
        return f"cluster: up to {len(cluster)} nodes of {_gb(node.total_bytes)} ({free})"
    count = f"{len(cluster)} node{'s' * (len(cluster) > 1)}"
    return f"cluster: {count}, free memory (MemAvailable) from telemetry"


def _margin(margin_bytes: float) -> str:
    return f"margin {_gb(margin_bytes)}" if margin_bytes >= 0 else f"short by {_gb(-margin_bytes)}"


def _gb(value: float) -> str:
    return f"{value / GB:,.1f} GB"


@plan.command("speed")
@_model_options
@click.option(
    "--nodes", type=click.IntRange(1, MAX_NODES), multiple=True, help="Node counts to bound (repeat)."
)
@click.option(
    "--context",
    type=click.IntRange(min=0),
    default=8192,
    show_default=True,
    help="Tokens already in the KV cache while decoding.",
)
@click.option(
    "--prompt-tokens", type=POSITIVE_INT, default=8192, show_default=True, help="Prompt length for prefill."
)
@click.option(
    "--concurrency", type=POSITIVE_INT, default=1, show_default=True, help="Sequences decoded together."
)
@click.option(
    "--bandwidth-gbs", type=POSITIVE, default=273.0, show_default=True, help="Memory bandwidth per node."
)
@click.option(
    "--link-gbps", type=POSITIVE, default=200.0, show_default=True, help="Fabric link rate per node."
)
@click.option(
    "--allreduce-latency-us",
    type=click.FloatRange(min=0),
    default=20.0,
    show_default=True,
    help="Fixed cost of one small all-reduce (an assumption).",
)
@click.option(
    "--precision",
    type=click.Choice(["fp4", "fp8", "int8", "bf16", "fp32"]),
    help="Compute precision of prefill (default: from the quantisation).",
)
@click.option("--peak-tflops", type=POSITIVE, help="Dense peak TFLOP/s per node at that precision.")
@click.option(
    "--split",
    type=click.Choice(list(SPLITS)),
    default="tensor",
    show_default=True,
    help="How the nodes share the model: tensor parallel (vLLM, SGLang, TRT-LLM), layer split "
    "(llama.cpp RPC: every node's layers in turn) or one-node replicas.",
)
@click.option(
    "--measured-decode",
    type=click.FloatRange(min=0),
    multiple=True,
    help="Measured decode tok/s, one per --nodes, in the same order.",
)
@click.option(
    "--measured-prefill",
    type=click.FloatRange(min=0),
    multiple=True,
    help="Measured prefill tok/s, one per --nodes, in the same order.",
)
def speed(**values: Any) -> None:
    """Upper bounds on decode (memory bandwidth + fabric) and prefill (compute + fabric)."""
    model = build_model(values)
    hardware = _hardware(values, model)
    nodes = values["nodes"] or (1,)
    rows = [_speed_row(model, n, hardware, values, i) for i, n in enumerate(nodes)]
    if values["as_json"]:
        document = {
            "model": model.model_dump(mode="json"),
            "hardware": hardware.model_dump(mode="json"),
            "rows": rows,
        }
        click.echo(json.dumps(document, indent=2))
    else:
        click.echo(format_speed(model, hardware, rows))


def _hardware(values: dict[str, Any], model: ModelSpec) -> Hardware:
    hardware = Hardware(
        memory_bandwidth_gbs=values["bandwidth_gbs"],
        link_gbps=values["link_gbps"],
        allreduce_latency_us=values["allreduce_latency_us"],
    )
    if values["peak_tflops"] is not None:
        precision = values["precision"] or model.quantisation.compute
        hardware = hardware.model_copy(
            update={"peak_tflops": {**hardware.peak_tflops, precision: values["peak_tflops"]}}
        )
    return hardware


def _measured(values: dict[str, Any], key: str, index: int) -> float | None:
    measured = values[key]
    if not measured:
        return None
    if len(measured) != len(values["nodes"] or (1,)):
        flag = "--" + key.replace("_", "-")
        raise PlanInputError(
            f"give one {flag} per --nodes (got {len(measured)} for {len(values['nodes'] or (1,))})."
        )
    return measured[index]


def _speed_row(model: ModelSpec, nodes: int, hardware: Hardware, values: dict[str, Any], index: int) -> dict:
    split = values.get("split") or "tensor"
    decode = decode_bound(
        model, nodes, hardware, values["context"], values["concurrency"], values["kv_dtype"], split=split
    )
    prefill = prefill_bound(
        model, nodes, hardware, values["prompt_tokens"], values["concurrency"], values["precision"], split=split
    )
    row: dict[str, Any] = {
        "nodes": nodes, "split": split, "bound_model": split_model(split, nodes),
        "decode": decode.model_dump(), "prefill": prefill.model_dump(),
    }  # fmt: skip
    for kind, bound in (("decode", decode.tokens_per_second), ("prefill", prefill.tokens_per_second)):
        measured = _measured(values, f"measured_{kind}", index)
        row[f"measured_{kind}"] = measured
        row[f"{kind}_percent_of_bound"] = None if measured is None else percent_of_bound(measured, bound)
    return row


def format_speed(model: ModelSpec, hardware: Hardware, rows: list[dict]) -> str:
    title = f"{model.name or 'model'}: {model.params / 1e9:,.1f} B params, {model.quant}, "
    lines = [title + f"weights {_gb(model.total_weight_bytes)}"]
    header = (
        f"{'nodes':>5}  {'decode bound':>13}  {'memory+comm ms':>15}  {'measured':>9}  {'% bound':>7}  "
        f"{'prefill bound':>14}  {'measured':>9}  {'% bound':>7}  bound model"
    )
    lines.append(header)
    for row in rows:
        d, p = row["decode"], row["prefill"]
        lines.append(
            f"{row['nodes']:>5}  {d['tokens_per_second']:>9,.2f} t/s  "
            f"{d['memory_seconds'] * 1e3:>7.1f}+{d['comm_seconds'] * 1e3:<7.1f}  "
            f"{_opt(row['measured_decode']):>9}  {_pct(row['decode_percent_of_bound']):>7}  "
            f"{p['tokens_per_second']:>10,.0f} t/s  {_opt(row['measured_prefill']):>9}  "
            f"{_pct(row['prefill_percent_of_bound']):>7}  {split_label(row['split'], row['nodes'])}"
        )
    lines.append(_assumptions(model, hardware, rows))
    return "\n".join(lines)


def _assumptions(model: ModelSpec, hardware: Hardware, rows: list[dict]) -> str:
    precision = rows[0]["prefill"]["precision"]
    notes = [
        f"{hardware.memory_bandwidth_gbs:g} GB/s per node",
        f"{hardware.link_gbps:g} Gb/s link",
        f"{hardware.allreduce_latency_us:g} us per all-reduce (assumed)",
        f"{precision.upper()} peak {hardware.peak_for(precision):g} TFLOP/s dense (assumed)",
    ]
    if not model.has_kv_shape:
        notes.append("KV-cache reads not counted (shape unknown)")
    return "assumptions: " + ", ".join(notes)


def _opt(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} %"
