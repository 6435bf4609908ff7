"""How fast can it go? Upper bounds on decode and prefill speed.

Decode is memory-bound: each step reads every active weight once, plus the
KV cache of every sequence in the batch. With tensor parallelism over N
nodes each node reads its 1/N of the weights and its share of the cache at
its own memory bandwidth, all at once, so

    memory time per step = (weights / N + node's KV share) / per-node bandwidth

Tensor parallelism then costs communication on the critical path: Megatron
style layers end the attention block and the MLP block each with an
all-reduce of the hidden state (``ALLREDUCES_PER_LAYER`` = 2), of
``hidden x activation bytes x batch`` bytes. A ring all-reduce of M bytes
over N nodes sends 2 (N-1)/N x M bytes per node, so each costs

    latency + 2 (N-1)/N x M / link rate

The engine waits for each all-reduce before the next layer (no overlap), so
step time = memory time + communication time, and decode tok/s = batch /
step time.

Prefill is compute-bound: ``2 x active params`` FLOPs per token plus causal
attention (``2 x attention layers x P^2 x query heads x head dim`` for a
prompt of P tokens), shared by N nodes at the peak rate of the weights'
precision, plus the same all-reduces carrying the whole prompt's hidden
states.

That is the tensor-parallel split (vLLM, SGLang, TRT-LLM). Each split has
its own model (``Split``):

* ``layer`` (pipeline; llama.cpp's RPC backend): each node holds a run of
  whole layers, and every token passes through every node's layers one after
  the other, so a step reads all the weights and KV cache at one node's
  bandwidth at a time (the nodes do not overlap: ASSUMPTION, no micro-batch
  pipelining), plus one activation transfer of ``hidden x activation bytes x
  batch`` per boundary (N-1 of them), each ``latency + bytes / link rate``.
  Prefill likewise: the whole prompt's FLOPs at one node's peak, plus N-1
  transfers of the prompt's hidden states. A layer split lets a model fit; it
  cannot be faster than one node.
* ``replica``: N independent copies, one node each; the batch's sequences (or
  prompts) are shared out as evenly as possible and the figure is the sum of
  the replicas' (no fabric on the critical path). At concurrency 1 that is one
  node's bound.

Figures: 273 GB/s per node and a 200 Gb/s link are NVIDIA's published
DGX Spark numbers. The all-reduce latency and the peak TFLOP/s are
ASSUMPTIONS (see ``Hardware``); every one is an input.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sparksync.core.planner.errors import PlanInputError
from sparksync.core.planner.kv_cache import kv_bytes_per_token, node_kv_share
from sparksync.core.planner.model import ModelSpec

ALLREDUCES_PER_LAYER = 2  # after attention's output projection, after the MLP's down projection

Split = Literal["tensor", "layer", "replica"]
SPLITS: tuple[Split, ...] = ("tensor", "layer", "replica")


def split_model(split: Split, nodes: int) -> str:
    """The bound's model in words, to stand beside every "% of bound"."""
    if nodes == 1:
        return "one node"
    return {
        "tensor": f"tensor parallel over {nodes} nodes ({ALLREDUCES_PER_LAYER} all-reduces per layer)",
        "layer": f"layer split over {nodes} nodes (every node's layers in turn, {nodes - 1} activation transfers)",
        "replica": f"{nodes} one-node replicas (their sum)",
    }[split]


def split_label(split: Split, nodes: int) -> str:
    """``split_model`` in a table cell: "1 node", "TP×8", "layers×2", "8 replicas"."""
    if nodes == 1:
        return "1 node"
    return {"tensor": f"TP×{nodes}", "layer": f"layers×{nodes}", "replica": f"{nodes} replicas"}[split]


def split_for_engine(engine: str | None, nodes: int) -> Split:
    """How an engine splits a model over several nodes: llama.cpp's RPC backend by layers."""
    return "layer" if nodes > 1 and (engine or "").lower().startswith("llama") else "tensor"


def _default_peaks() -> dict[str, float]:
    # ASSUMPTIONS. NVIDIA publishes "up to 1 PFLOP of FP4 AI performance" for
    # GB10, with 2:4 structured sparsity: dense FP4 is half, 500 TFLOP/s.
    # Blackwell tensor cores halve the rate at each doubling of precision,
    # giving FP8/INT8 250 and BF16 125 (a ceiling: measured BF16 GEMMs may be
    # lower). FP32 runs on the 6,144 CUDA cores: 6,144 x 2 FLOPs x ~2.5 GHz.
    return {"fp4": 500.0, "fp8": 250.0, "int8": 250.0, "bf16": 125.0, "fp32": 31.0}


class Hardware(BaseModel):
    model_config = ConfigDict(frozen=True)

    memory_bandwidth_gbs: float = Field(273.0, gt=0, description="Per node, GB/s (published: 273).")
    link_gbps: float = Field(200.0, gt=0, description="Per node fabric link, Gb/s (published: 200).")
    allreduce_latency_us: float = Field(
        20.0, ge=0, description="ASSUMPTION: fixed cost of one small all-reduce across the nodes, µs."
    )
    peak_tflops: dict[str, float] = Field(default_factory=_default_peaks, description="Dense, per node.")
    activation_bytes: float = Field(2.0, gt=0, description="Bytes per hidden value on the wire (BF16).")

    @property
    def link_bytes_per_s(self) -> float:
        return self.link_gbps * 1e9 / 8

    def peak_for(self, precision: str) -> float:
        peak = self.peak_tflops.get(precision)
        if peak is None or peak <= 0:
            raise PlanInputError(f"no peak TFLOP/s for {precision!r} compute: pass --peak-tflops.")
        return peak


def allreduce_seconds(message_bytes: float, nodes: int, hardware: Hardware) -> float:
    """One ring all-reduce of ``message_bytes`` across ``nodes``; free on one node."""
    if nodes == 1:
        return 0.0
    volume = 2 * (nodes - 1) / nodes * message_bytes
    return hardware.allreduce_latency_us * 1e-6 + volume / hardware.link_bytes_per_s


def tp_comm_seconds(model: ModelSpec, nodes: int, tokens: int, hardware: Hardware) -> float:
    """Communication of one forward pass over ``tokens`` tokens (a decode step or a prompt)."""
    if nodes == 1:
        return 0.0
    if model.layers is None or model.hidden is None:
        raise PlanInputError(
            "the tensor-parallel communication cost needs the model's layers and hidden size: "
            "give --layers and --hidden (or --model-file)."
        )
    message = model.hidden * hardware.activation_bytes * tokens
    return ALLREDUCES_PER_LAYER * model.layers * allreduce_seconds(message, nodes, hardware)


def transfer_seconds(message_bytes: float, hardware: Hardware) -> float:
    """One point-to-point transfer of activations to the next stage of a layer split."""
    return hardware.allreduce_latency_us * 1e-6 + message_bytes / hardware.link_bytes_per_s


def layer_comm_seconds(model: ModelSpec, nodes: int, tokens: int, hardware: Hardware) -> float:
    """A layer split's transfers for one forward pass: one per boundary between nodes."""
    if nodes == 1:
        return 0.0
    if model.hidden is None:
        raise PlanInputError("the layer split's transfer cost needs the model's hidden size: give --hidden "
                             "(or --model-file).")
    return (nodes - 1) * transfer_seconds(model.hidden * hardware.activation_bytes * tokens, hardware)


def _shares(batch: int, replicas: int) -> list[int]:
    """``batch`` sequences shared out over ``replicas`` as evenly as possible (idle ones left out)."""
    quotient, rest = divmod(batch, replicas)
    return [quotient + (1 if i < rest else 0) for i in range(replicas) if quotient + (1 if i < rest else 0)]


class DecodeBound(BaseModel):
    nodes: int
    split: Split = "tensor"
    batch: int
    context: int
    weight_bytes_per_node: float = Field(description="Weights one node reads per step.")
    kv_bytes_per_node: float = Field(description="KV cache one node reads per step.")
    memory_seconds: float
    comm_seconds: float
    step_seconds: float
    tokens_per_second: float = Field(description="All sequences together: batch / step time.")
    kv_counted: bool

    @property
    def per_sequence_tokens_per_second(self) -> float:
        return 1.0 / self.step_seconds


def decode_bound(
    model: ModelSpec,
    nodes: int,
    hardware: Hardware | None = None,
    context: int = 0,
    batch: int = 1,
    kv_dtype: str = "bf16",
    split: Split = "tensor",
) -> DecodeBound:
    """The fastest decode ``nodes`` nodes can reach, ``context`` tokens into each sequence."""
    hardware = hardware or Hardware()
    _check(nodes=(nodes, 1), batch=(batch, 1), context=(context, 0))
    if split == "replica" and nodes > 1:
        return _replicas_decode(model, nodes, hardware, context, batch, kv_dtype)
    kv_counted = model.has_kv_shape
    kv_all = kv_bytes_per_token(model, kv_dtype) * context * batch if kv_counted else 0.0
    bandwidth = hardware.memory_bandwidth_gbs * 1e9
    if split == "layer":
        # Each node holds 1/N of the layers (weights and cache), but they take turns.
        weights, kv = _weights_read_per_step(model, batch) / nodes, kv_all / nodes
        memory = nodes * (weights + kv) / bandwidth
        comm = layer_comm_seconds(model, nodes, batch, hardware)
    else:
        weights = _weights_read_per_step(model, batch) / nodes
        kv = kv_all * node_kv_share(model, nodes) if kv_counted else 0.0
        memory = (weights + kv) / bandwidth
        comm = tp_comm_seconds(model, nodes, batch, hardware)
    step = memory + comm
    return DecodeBound(
        nodes=nodes,
        split=split,
        batch=batch,
        context=context,
        weight_bytes_per_node=weights,
        kv_bytes_per_node=kv,
        memory_seconds=memory,
        comm_seconds=comm,
        step_seconds=step,
        tokens_per_second=batch / step,
        kv_counted=kv_counted,
    )


def _replicas_decode(model: ModelSpec, nodes: int, hardware: Hardware, context: int, batch: int,
                     kv_dtype: str) -> DecodeBound:
    parts = [decode_bound(model, 1, hardware, context, share, kv_dtype) for share in _shares(batch, nodes)]
    slowest = max(parts, key=lambda p: p.step_seconds)
    return slowest.model_copy(update={
        "nodes": nodes, "split": "replica", "batch": batch,
        "tokens_per_second": sum(p.tokens_per_second for p in parts),
    })  # fmt: skip


def _weights_read_per_step(model: ModelSpec, batch: int) -> float:
    """A dense model reads all its weights per step. An MoE reads the experts its
    tokens are routed to: at most ``batch`` x the active share, at most all."""
    return model.total_weight_bytes * min(1.0, model.active_fraction * batch)


class PrefillBound(BaseModel):
    nodes: int
    split: Split = "tensor"
    prompt_tokens: int
    batch: int
    precision: str
    peak_tflops_per_node: float
    flops: float
    compute_seconds: float
    comm_seconds: float
    seconds: float
    tokens_per_second: float
    attention_counted: bool


def prefill_bound(
    model: ModelSpec,
    nodes: int,
    hardware: Hardware | None = None,
    prompt_tokens: int = 8192,
    batch: int = 1,
    precision: str | None = None,
    split: Split = "tensor",
) -> PrefillBound:
    """The fastest ``nodes`` nodes can process ``batch`` prompts of ``prompt_tokens``."""
    hardware = hardware or Hardware()
    _check(nodes=(nodes, 1), batch=(batch, 1), prompt_tokens=(prompt_tokens, 1))
    if split == "replica" and nodes > 1:
        shares = _shares(batch, nodes)
        slowest = prefill_bound(model, 1, hardware, prompt_tokens, max(shares), precision)
        return slowest.model_copy(update={
            "nodes": nodes, "split": "replica", "batch": batch,
            "tokens_per_second": batch * prompt_tokens / slowest.seconds,
        })  # fmt: skip
    precision = precision or model.quantisation.compute
    peak = hardware.peak_for(precision)
    attention = _attention_flops(model, prompt_tokens)
    active = model.active_params if model.active_params is not None else model.params
    flops = batch * (2 * active * prompt_tokens + (attention or 0.0))
    if split == "layer":  # the nodes take turns over the whole prompt
        compute = flops / (peak * 1e12)
        comm = layer_comm_seconds(model, nodes, prompt_tokens * batch, hardware)
    else:
        compute = flops / nodes / (peak * 1e12)
        comm = tp_comm_seconds(model, nodes, prompt_tokens * batch, hardware)
    seconds = compute + comm
    return PrefillBound(
        nodes=nodes,
        split=split,
        prompt_tokens=prompt_tokens,
        batch=batch,
        precision=precision,
        peak_tflops_per_node=peak,
        flops=flops,
        compute_seconds=compute,
        comm_seconds=comm,
        seconds=seconds,
        tokens_per_second=batch * prompt_tokens / seconds,
        attention_counted=attention is not None,
    )


def _attention_flops(model: ModelSpec, prompt_tokens: int) -> float | None:
    """Causal attention over one prompt: Q.K^T and A.V each cost 2 P^2 d FLOPs, halved by the mask."""
    heads, layers = model.query_heads, model.cache_layers
    if heads is None or layers is None or model.head_dim is None:
        return None
    return 2.0 * layers * prompt_tokens**2 * heads * model.head_dim


def percent_of_bound(measured: float, bound: float) -> float:
    """The measured speed as a percentage of the bound (100 = at the physical limit)."""
    if measured < 0 or bound <= 0:
        raise PlanInputError(f"cannot compare a measured {measured:g} tok/s with a bound of {bound:g} tok/s.")
    return 100.0 * measured / bound


def _check(**values: tuple[int, int]) -> None:
    for name, (value, minimum) in values.items():
        if value < minimum:
            raise PlanInputError(f"{name} must be at least {minimum} (got {value}).")
