"""Recipes: typed, versioned descriptions of a workload, independent of placement.

A recipe names the engine, the model, the parallelism of one replica and how
many replicas to run, the ports, extra arguments and environment, how to tell
the engine is ready and where its tokens/s come from. Where it is placed (on
which nodes) is the plan's business (``plan.py``); what each node runs is
generated from both by ``commands/``.

One Spark has one GPU, so a replica of tensor size T, pipeline size P and
data-parallel size D spans ``T x P x D`` nodes.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sparksync.core.planner.fit import FitOptions
from sparksync.core.planner.model import ModelSpec
from sparksync.core.workloads.errors import RecipeError, describe_validation
from sparksync.core.workloads.launch_spec import ReadinessProbe, TokensSource

RECIPE_VERSION = 1
MAX_NODES = 8  # a SparkSync cluster holds at most 8 nodes

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PROBE_PORT = 1  # stands in for the engine's port while a recipe's probe is checked


class Engine(str, Enum):
    llamacpp = "llama.cpp"
    vllm = "vllm"
    sglang = "sglang"
    trtllm = "trtllm"
    torchrun = "torchrun"
    custom = "custom"


INFERENCE_ENGINES = (Engine.llamacpp, Engine.vllm, Engine.sglang, Engine.trtllm)


class RecipePart(BaseModel):
    """Recipes are written by people: an unknown (misspelt) field is an error, not ignored."""

    model_config = ConfigDict(extra="forbid")


class Parallelism(RecipePart):
    tensor: int = Field(1, ge=1, le=MAX_NODES, description="Tensor-parallel size across nodes.")
    pipeline: int = Field(1, ge=1, le=MAX_NODES, description="Pipeline stages (layer split) across nodes.")
    data: int = Field(1, ge=1, le=MAX_NODES, description="Data-parallel ranks in one replica (training).")
    replicas: int = Field(1, ge=1, le=MAX_NODES, description="Independent copies, each on its own group.")

    @property
    def shards(self) -> int:
        """Ways the weights are split: each data-parallel rank holds a full shard set."""
        return self.tensor * self.pipeline

    @property
    def nodes_per_replica(self) -> int:
        return self.shards * self.data

    def describe(self) -> str:
        return f"tensor {self.tensor} x pipeline {self.pipeline} x data {self.data}"

    @model_validator(mode="after")
    def _fits_a_cluster(self) -> Parallelism:
        total = self.nodes_per_replica * self.replicas
        if total > MAX_NODES:
            raise ValueError(
                f"{self.replicas} replica(s) of {self.nodes_per_replica} node(s) need {total} nodes; "
                f"a cluster has at most {MAX_NODES}"
            )
        return self


class Ports(RecipePart):
    http: int = Field(8080, ge=1, le=65535, description="The engine's HTTP API (OpenAI-compatible).")
    rpc: int = Field(50052, ge=1, le=65535, description="llama.cpp rpc-server on the other nodes.")
    rendezvous: int = Field(29500, ge=1, le=65535, description="torchrun master / SGLang dist-init port.")
    ray: int = Field(6379, ge=1, le=65535, description="Ray head (vLLM over Ray).")


class LlamaCppOptions(RecipePart):
    server_binary: str = "llama-server"
    rpc_binary: str = "rpc-server"
    context: int | None = Field(None, ge=1, description="-c; default: the model's own context length.")
    parallel: int | None = Field(None, ge=1, description="-np, server slots.")
    threads: int | None = Field(None, ge=1, description="-t on llama-server and rpc-server.")
    gpu_layers: int | None = Field(999, ge=0, description="-ngl; layers offloaded to GPUs and RPC devices.")


class TrainingOptions(RecipePart):
    launcher: str = "torchrun"
    script: str = Field("", description="The training script, or a module name when module is true.")
    module: bool = Field(False, description="Run the script as a module (torchrun -m).")
    args: list[str] = Field(default_factory=list, description="Arguments for the script.")
    workdir: str | None = Field(None, description="Working directory on every node (a checkout).")
    nproc_per_node: int = Field(1, ge=1, description="Processes per node; one per GPU on a Spark.")
    rendezvous: Literal["static", "c10d"] = Field(
        "static", description="static: --master_addr/--master_port; c10d: --rdzv-backend c10d."
    )


class Container(RecipePart):
    """Run the engine in a container (vLLM from NGC), sharing the host's network and IPC."""

    image: str = Field(min_length=1, description="e.g. nvcr.io/nvidia/vllm:25.11-py3")
    runtime: str = "docker"
    mounts: list[str] = Field(default_factory=list, description="docker -v specs, host:container.")
    extra_args: list[str] = Field(default_factory=list, description="More docker run options.")


class CustomCommand(RecipePart):
    """Any command. Placeholders {rank} {nnodes} {group} {node_ip} {head_ip} {http_port}
    {rendezvous_port} are filled per rank; other braces are left alone."""

    argv: list[str] = Field(default_factory=list)
    head_only: bool = Field(False, description="Run on the group's first node only.")


class ReadinessSpec(RecipePart):
    """A recipe's own readiness probe; an http probe asks the engine's HTTP port."""

    kind: Literal["http", "log", "process"]
    path: str | None = None
    pattern: str | None = None
    timeout_s: float = Field(600.0, gt=0)

    def probe(self, host: str, port: int) -> ReadinessProbe:
        return ReadinessProbe(
            kind=self.kind,
            host=host,
            port=port,
            path=self.path,
            pattern=self.pattern,
            timeout_s=self.timeout_s,
        )

    @model_validator(mode="after")
    def _valid(self) -> ReadinessSpec:
        self.probe("127.0.0.1", _PROBE_PORT)  # raises with the reason
        return self


class TokensSpec(RecipePart):
    """A recipe's own tokens/s source; prometheus counters are read on the engine's HTTP port."""

    kind: Literal["prometheus", "log", "none"]
    decode_counter: str | None = None
    prefill_counter: str | None = None
    slots_path: str | None = None
    decode_gauge: str | None = None
    busy_gauge: str | None = None
    pattern: str | None = None
    scope: Literal["rank", "workload"] = "rank"

    def source(self, host: str, port: int) -> TokensSource:
        return TokensSource(
            kind=self.kind, host=host, port=port, decode_counter=self.decode_counter,
            prefill_counter=self.prefill_counter, slots_path=self.slots_path,
            decode_gauge=self.decode_gauge, busy_gauge=self.busy_gauge, pattern=self.pattern, scope=self.scope,
        )  # fmt: skip

    @model_validator(mode="after")
    def _valid(self) -> TokensSpec:
        self.source("127.0.0.1", _PROBE_PORT)
        return self


class MemoryNeeds(RecipePart):
    """What the model needs, in the planner's terms, for the memory check before launch."""

    model: ModelSpec
    options: FitOptions = Field(default_factory=FitOptions)


class Recipe(RecipePart):
    version: int = Field(RECIPE_VERSION, ge=1)
    name: str
    description: str = ""
    engine: Engine
    model: str = Field("", description="A path on the nodes or a model name (Hugging Face).")
    served_name: str | None = Field(None, description="The name clients ask for; default: the model.")
    parallelism: Parallelism = Field(default_factory=Parallelism)
    ports: Ports = Field(default_factory=Ports)
    http_host: str = Field("127.0.0.1", description="Where the HTTP API listens on the head node.")
    python: str = Field("python3", description="Interpreter for Python entry points (SGLang).")
    extra_args: list[str] = Field(
        default_factory=list,
        description="Appended to the engine's main command (torchrun: launcher options before the script).",
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Set on every rank; wins over the fabric's."
    )
    readiness: ReadinessSpec | None = Field(None, description="Default: the engine's own probe.")
    tokens: TokensSpec | None = Field(None, description="Default: the engine's own counters or log lines.")
    container: Container | None = None
    collectives: Literal["nccl", "rocenante"] | None = Field(
        None, description="Collective backend for this workload; default: the cluster's fabric setting."
    )
    llamacpp: LlamaCppOptions = Field(default_factory=LlamaCppOptions)
    training: TrainingOptions = Field(default_factory=TrainingOptions)
    custom: CustomCommand = Field(default_factory=CustomCommand)
    memory: MemoryNeeds | None = Field(None, description="For the memory check; without it, unchecked.")

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not NAME_RE.match(value):
            raise ValueError(
                f"{value!r} is not a recipe name: use letters, digits, '.', '_' or '-' (at most 63)"
            )
        return value

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value > RECIPE_VERSION:
            raise ValueError(f"format {value} is newer than this SparkSync reads ({RECIPE_VERSION})")
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if not _ENV_RE.match(k)]
        if bad:
            raise ValueError(f"not environment variable names: {', '.join(map(repr, bad))}")
        return value

    @model_validator(mode="after")
    def _engine_rules(self) -> Recipe:
        problem = _engine_problem(self)
        if problem:
            raise ValueError(problem)
        return self

    @property
    def nodes_per_replica(self) -> int:
        return self.parallelism.nodes_per_replica

    def updated(self, **changes) -> Recipe:
        """A copy with top-level fields replaced (``model=``, ``parallelism=``...), validated again."""
        return Recipe.build(**{**self.model_dump(), **changes})

    @classmethod
    def build(cls, **fields) -> Recipe:
        """Construct from user input; a bad value raises RecipeError naming the field."""
        try:
            return cls(**fields)
        except ValidationError as exc:
            raise RecipeError(describe_validation(exc, f"recipe {fields.get('name', '')!r}")) from None


def _engine_problem(recipe: Recipe) -> str | None:
    par = recipe.parallelism
    if recipe.container is not None and recipe.engine is not Engine.vllm:
        return f"containers are supported for vLLM only; run {recipe.engine.value} natively (no 'container')"
    if recipe.engine is Engine.llamacpp and (par.tensor > 1 or par.data > 1):
        return (
            "llama.cpp splits a model by layers over its RPC servers: set parallelism.pipeline to the "
            "number of nodes and leave tensor and data at 1"
        )
    if recipe.engine in (Engine.vllm, Engine.sglang, Engine.trtllm) and par.data > 1:
        return f"{recipe.engine.value} serves one model per replica: use replicas, not data parallelism"
    return None
