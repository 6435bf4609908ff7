"""What the planner knows about a model: its size, quantisation and shape.

Only ``params`` and ``quant`` are required. The shape (layers, KV heads, head
dim, hidden size) is needed for the KV cache and the tensor-parallel
communication cost; without it those terms are left out and the answer says
so. Numbers read from the model's own files (``readers``) fill every field,
``weight_bytes`` exactly.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sparksync.core.planner.errors import PlanInputError
from sparksync.core.planner.quant import Quant, quant_for


class ModelSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str | None = None
    params: float = Field(gt=0, description="Total parameters, all experts included.")
    quant: str = Field(description="Quantisation name, e.g. nvfp4, fp8, bf16, q4_k_m.")
    active_params: float | None = Field(
        None, gt=0, description="Parameters used per token (mixture of experts); default: all."
    )
    weight_bytes: int | None = Field(
        None, gt=0, description="Exact bytes of the weights, when read from files; else params x quant."
    )
    layers: int | None = Field(None, gt=0)
    kv_heads: int | None = Field(None, gt=0)
    head_dim: int | None = Field(None, gt=0)
    hidden: int | None = Field(None, gt=0)
    vocab: int | None = Field(None, gt=0)
    attention_heads: int | None = Field(None, gt=0, description="Query heads; default hidden / head_dim.")
    kv_layers: int | None = Field(
        None, gt=0, description="Layers that hold a KV cache (hybrid models); default: all layers."
    )
    mla_kv_dim: int | None = Field(
        None, gt=0, description="Multi-head latent attention: cached values per token per layer."
    )
    max_context: int | None = Field(None, gt=0)
    source: str | None = Field(None, description="Where the numbers came from (a file path).")

    @field_validator("quant")
    @classmethod
    def _known_quant(cls, value: str) -> str:
        return quant_for(value).name  # raises UnknownQuantError, which names the known ones

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        if self.active_params is not None and self.active_params > self.params:
            raise ValueError(f"active_params ({self.active_params:g}) exceeds params ({self.params:g})")
        if self.kv_layers is not None and self.layers is not None and self.kv_layers > self.layers:
            raise ValueError(f"kv_layers ({self.kv_layers}) exceeds layers ({self.layers})")
        return self

    @classmethod
    def build(cls, **fields) -> ModelSpec:
        """Construct from user input; a bad value raises PlanInputError naming the field."""
        try:
            return cls(**fields)
        except ValidationError as exc:
            raise PlanInputError(_describe(exc)) from None

    @property
    def quantisation(self) -> Quant:
        return quant_for(self.quant)

    @property
    def total_weight_bytes(self) -> float:
        if self.weight_bytes is not None:
            return float(self.weight_bytes)
        return self.params * self.quantisation.bytes_per_param

    @property
    def active_fraction(self) -> float:
        return 1.0 if self.active_params is None else self.active_params / self.params

    @property
    def active_weight_bytes(self) -> float:
        """Weight bytes one token reads: all of a dense model, the routed share of an MoE."""
        return self.total_weight_bytes * self.active_fraction

    @property
    def query_heads(self) -> int | None:
        if self.attention_heads is not None:
            return self.attention_heads
        if self.hidden is not None and self.head_dim is not None:
            return self.hidden // self.head_dim
        return None

    @property
    def cache_layers(self) -> int | None:
        return self.kv_layers if self.kv_layers is not None else self.layers

    @property
    def has_kv_shape(self) -> bool:
        if self.cache_layers is None:
            return False
        return self.mla_kv_dim is not None or (self.kv_heads is not None and self.head_dim is not None)


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "model"
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message} (got {error.get('input')!r})" if where != "model" else message)
    return "bad model numbers: " + "; ".join(parts) + ". Fix the value and run again."
