"""TensorRT-LLM: ``trtllm-serve`` alone on one node; under ``mpirun`` from the head across nodes.

Documentation these commands follow:

- ``trtllm-serve <model> --backend pytorch --tp_size <tp> --pp_size <pp>
  --host <host> --port <port>``, and its ``/health`` endpoint:
  nvidia.github.io/TensorRT-LLM/latest/commands/trtllm-serve.html
  (``--served_model_name`` is in the 1.x releases' syntax section).
- multi-node on DGX Spark: NVIDIA's playbook "TRT LLM for Inference / Run on
  two Sparks" (github.com/NVIDIA/dgx-spark-playbooks, nvidia/trt-llm/README.md)
  runs ``mpirun -x ... trtllm-llmapi-launch trtllm-serve $MODEL --tp_size 2
  --backend pytorch ... --port 8355`` from the primary node only, with
  ``UCX_NET_DEVICES``, ``NCCL_SOCKET_IFNAME`` and ``OMPI_MCA_btl_tcp_if_include``
  naming the CX-7 interfaces.
- ``mpirun -H host1,host2 -np N -x NAME``: Open MPI's mpirun(1) (a host list
  gives each host one slot; ``-x NAME`` exports NAME's value to every rank):
  docs.open-mpi.org/en/v5.0.x/man-openmpi/man1/mpirun.1.html

mpirun starts the other ranks itself, over SSH between the nodes (as NVIDIA's
cluster setup configures), so a group has a single launch, on its head. The
ranks all get the head's fabric variables, so every node must name its fabric
interfaces alike (DGX Sparks do).
"""

from __future__ import annotations

from sparksync.core.workloads.commands.common import (
    optional,
    require_model,
    serving_readiness,
    serving_tokens,
)
from sparksync.core.workloads.commands.context import GroupContext
from sparksync.core.workloads.errors import FabricError
from sparksync.core.workloads.launch_spec import RankLaunch
from sparksync.core.workloads.recipe import TokensSpec

# trtllm-serve's /metrics carries iteration statistics, not token counters: no source by default.
TOKENS = TokensSpec(kind="none")


def build(ctx: GroupContext) -> list[RankLaunch]:
    argv = _mpirun(ctx) + serve_argv(ctx)
    head = ctx.launch(
        ctx.head, "trtllm-serve", argv, serving_readiness(ctx), ports=[ctx.recipe.ports.http],
        tokens=serving_tokens(ctx, TOKENS),
    )  # fmt: skip
    return [head]


def serve_argv(ctx: GroupContext) -> list[str]:
    recipe, par = ctx.recipe, ctx.recipe.parallelism
    return [
        "trtllm-serve", require_model(recipe), *optional("--served_model_name", recipe.served_name),
        "--host", recipe.http_host, "--port", str(recipe.ports.http), "--backend", "pytorch",
        "--tp_size", str(par.tensor), *(optional("--pp_size", par.pipeline) if par.pipeline > 1 else []),
        *recipe.extra_args,
    ]  # fmt: skip


def _mpirun(ctx: GroupContext) -> list[str]:
    if ctx.size == 1:
        return []
    _check_same_interfaces(ctx)
    exported = [part for name in sorted(ctx.env(ctx.head)) for part in ("-x", name)]
    hosts = ",".join(ctx.ips[n] for n in ctx.nodes)
    return ["mpirun", "-H", hosts, "-np", str(ctx.size), *exported, "trtllm-llmapi-launch"]


def _check_same_interfaces(ctx: GroupContext) -> None:
    head_env = ctx.fabric_env.get(ctx.head, {})
    differing = [n for n in ctx.nodes[1:] if ctx.fabric_env.get(n, {}) != head_env]
    if differing:
        raise FabricError(
            f"TRT-LLM's mpirun gives every rank the head's fabric settings, but {', '.join(differing)} "
            f"name their fabric interfaces or RoCE devices differently from {ctx.head}. Use nodes whose "
            "CX-7 ports are cabled and named alike, or another engine."
        )
