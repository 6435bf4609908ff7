"""Will it fit? How many nodes a model needs, against each node's real free memory.

Tensor parallelism splits the weights evenly, so each of N nodes holds:

    weights / N  +  KV cache x (its share of the KV heads)  +  runtime overhead

and the model fits on N nodes when that is no more than the free memory of
each of the N nodes with the most free memory. The margin is what the
tightest of them has left. Node memory is always an input: read from the
nodes' telemetry (MemAvailable, the memory a new process can really get) or
stated by the user, never assumed; DGX Spark comes with 128 GB or 64 GB.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, computed_field

from sparksync.core.planner.errors import PlanInputError
from sparksync.core.planner.kv_cache import kv_cache_bytes, kv_value_bytes, node_kv_share
from sparksync.core.planner.model import ModelSpec
from sparksync_agent.protocol import MemorySample

GB = 1e9
MAX_NODES = 8  # a SparkSync cluster holds at most 8 nodes
# Runtime memory per node besides weights and KV cache: the CUDA context,
# activations, CUDA graphs and the engine's own buffers. An assumption (a few
# GB for vLLM or TRT-LLM on one GPU); set it with --overhead-gb.
DEFAULT_OVERHEAD_GB = 4.0


class NodeMemory(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    total_bytes: int = Field(ge=0)
    free_bytes: int = Field(ge=0)
    source: str = Field(description='"telemetry" (MemAvailable) or "stated" (by the user).')

    @classmethod
    def from_sample(cls, name: str, memory: MemorySample) -> NodeMemory:
        # MemAvailable, not MemFree: the page cache is given back on demand.
        return cls(
            name=name, total_bytes=memory.total_bytes, free_bytes=memory.available_bytes, source="telemetry"
        )

    @classmethod
    def stated(cls, name: str, total_gb: float, reserve_gb: float = 0.0) -> NodeMemory:
        """A node of ``total_gb`` with ``reserve_gb`` kept for the OS and desktop."""
        if total_gb <= 0 or reserve_gb < 0 or reserve_gb >= total_gb:
            raise PlanInputError(
                f"node memory must be positive and more than the reserve (got {total_gb:g} GB, "
                f"reserve {reserve_gb:g} GB). DGX Spark has 128 GB (or 64 GB)."
            )
        total = int(total_gb * GB)
        return cls(
            name=name, total_bytes=total, free_bytes=int((total_gb - reserve_gb) * GB), source="stated"
        )


def stated_cluster(count: int, memory_gb: float, reserve_gb: float = 0.0) -> list[NodeMemory]:
    """``count`` identical nodes, named node-1 ... node-N."""
    if not 1 <= count <= MAX_NODES:
        raise PlanInputError(f"a cluster has 1 to {MAX_NODES} nodes (got {count}).")
    return [NodeMemory.stated(f"node-{i}", memory_gb, reserve_gb) for i in range(1, count + 1)]


class FitOptions(BaseModel):
    model_config = ConfigDict(frozen=True)

    context: int = Field(8192, ge=1, description="Tokens of context per sequence.")
    concurrency: int = Field(1, ge=1, description="Sequences served at once.")
    kv_dtype: str = "bf16"
    overhead_bytes: float = Field(DEFAULT_OVERHEAD_GB * GB, ge=0, description="Runtime memory per node.")


class NodeFit(BaseModel):
    name: str
    free_bytes: int
    needed_bytes: float
    margin_bytes: float


class FitPlan(BaseModel):
    """The model on exactly ``nodes`` nodes."""

    nodes: int
    fits: bool
    weights_bytes_per_node: float
    kv_bytes_per_node: float
    overhead_bytes_per_node: float
    needed_bytes_per_node: float
    margin_bytes: float = Field(description="Free minus needed on the tightest node; negative when short.")
    tensor_parallel_ok: bool | None = Field(description="N splits the heads evenly; None when unknown.")
    placement: list[NodeFit]


class FitReport(BaseModel):
    model: ModelSpec
    options: FitOptions
    cluster: list[NodeMemory]
    weights_bytes: float
    kv_cache_bytes: float | None = Field(description="Whole cache; None when the shape is unknown.")
    nodes_needed: int | None = Field(description="Fewest nodes of this cluster it fits on; None: none.")
    tensor_parallel_nodes: int | None = Field(description="Fewest that also split the heads evenly.")
    checked: FitPlan = Field(description="The plan at the requested N, else at nodes_needed, else all.")
    warnings: list[str]

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented form; mypy refuses it
    @property
    def fits(self) -> bool:
        return self.checked.fits


def plan_on(model: ModelSpec, cluster: list[NodeMemory], options: FitOptions, nodes: int) -> FitPlan:
    """The model split over the ``nodes`` nodes of ``cluster`` with the most free memory."""
    if not 1 <= nodes <= len(cluster):
        raise PlanInputError(
            f"cannot plan on {nodes} nodes: the cluster has {len(cluster)}. Pass --nodes 1 to {len(cluster)}."
        )
    chosen = sorted(cluster, key=lambda n: n.free_bytes, reverse=True)[:nodes]
    weights = model.total_weight_bytes / nodes
    kv = _node_kv(model, options, nodes)
    needed = weights + kv + options.overhead_bytes
    placement = [
        NodeFit(name=n.name, free_bytes=n.free_bytes, needed_bytes=needed, margin_bytes=n.free_bytes - needed)
        for n in chosen
    ]
    margin = min(p.margin_bytes for p in placement)
    return FitPlan(
        nodes=nodes,
        fits=margin >= 0,
        weights_bytes_per_node=weights,
        kv_bytes_per_node=kv,
        overhead_bytes_per_node=options.overhead_bytes,
        needed_bytes_per_node=needed,
        margin_bytes=margin,
        tensor_parallel_ok=tensor_parallel_ok(model, nodes),
        placement=placement,
    )


def plan_fit(
    model: ModelSpec, cluster: list[NodeMemory], options: FitOptions | None = None, nodes: int | None = None
) -> FitReport:
    """How many nodes of ``cluster`` the model needs; with ``nodes``, whether it fits on that many."""
    options = options or FitOptions()
    kv_value_bytes(options.kv_dtype)  # an unknown KV type fails before any sum
    if not cluster:
        raise PlanInputError("the cluster has no nodes to plan on. Pair a node, or state --node-memory-gb.")
    plans = [plan_on(model, cluster, options, n) for n in range(1, len(cluster) + 1)]
    needed = next((p.nodes for p in plans if p.fits), None)
    tp_nodes = next((p.nodes for p in plans if p.fits and p.tensor_parallel_ok is not False), None)
    if nodes is not None:
        checked = plan_on(model, cluster, options, nodes)  # a bad N raises here, clearly
    else:
        checked = plans[(needed or len(cluster)) - 1]
    return FitReport(
        model=model,
        options=options,
        cluster=cluster,
        weights_bytes=model.total_weight_bytes,
        kv_cache_bytes=_total_kv(model, options),
        nodes_needed=needed,
        tensor_parallel_nodes=tp_nodes,
        checked=checked,
        warnings=_warnings(model, options, checked),
    )


def tensor_parallel_ok(model: ModelSpec, nodes: int) -> bool | None:
    """Engines (vLLM, TRT-LLM) need N to divide the query heads, and the KV heads to
    divide evenly (or be replicated evenly) across N."""
    heads = model.query_heads
    if heads is None:
        return None
    if heads % nodes:
        return False
    if model.mla_kv_dim is not None or model.kv_heads is None:
        return True  # an MLA latent is replicated, not split
    return model.kv_heads % nodes == 0 or nodes % model.kv_heads == 0


def _node_kv(model: ModelSpec, options: FitOptions, nodes: int) -> float:
    total = _total_kv(model, options)
    return 0.0 if total is None else total * node_kv_share(model, nodes)


def _total_kv(model: ModelSpec, options: FitOptions) -> float | None:
    if not model.has_kv_shape:
        return None
    return kv_cache_bytes(model, options.context, options.concurrency, options.kv_dtype)


def _warnings(model: ModelSpec, options: FitOptions, plan: FitPlan) -> list[str]:
    notes = []
    if not model.has_kv_shape:
        notes.append(
            "KV cache not counted: the model's shape is unknown. Give --layers, --kv-heads and "
            "--head-dim (or --model-file) to count it."
        )
    if model.max_context is not None and options.context > model.max_context:
        notes.append(f"context {options.context} exceeds the model's maximum of {model.max_context} tokens.")
    if plan.tensor_parallel_ok is False:
        notes.append(
            f"{plan.nodes} nodes do not split the model's {model.query_heads} attention heads evenly; "
            "tensor-parallel engines need a size that does (often 1, 2, 4 or 8)."
        )
    return notes
