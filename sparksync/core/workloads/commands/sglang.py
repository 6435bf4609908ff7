"""SGLang: the same ``sglang.launch_server`` on every node, told its rank and the head's address.

Documentation these commands follow:

- multi-node: ``python3 -m sglang.launch_server --model-path M --tp N
  --dist-init-addr <first node's IP>:<port> --nnodes N --node-rank R``, the
  same command on every node but the rank:
  docs.sglang.io/references/multi_node_deployment/multi_node.html
- server arguments (``--host``, ``--port``, ``--tp``/``--tp-size``,
  ``--pp-size``, ``--served-model-name``, ``--enable-metrics``):
  docs.sglang.io/advanced_features/server_arguments.html
- ``--enable-metrics`` serves ``sglang:generation_tokens_total`` and
  ``sglang:prompt_tokens_total`` on ``/metrics`` of the HTTP port:
  docs.sglang.io/references/production_metrics.html. In its source
  (python/sglang/srt/metrics/collector.py) the generation counter grows in
  ``observe_one_finished_request``, i.e. when a request ends, while the
  scheduler sets the gauge ``sglang:gen_throughput`` (tokens/s) as it decodes
  and ``sglang:num_running_reqs``; the gauge keeps its last value when idle,
  so live decode reads it only while requests run.

Only rank 0 serves HTTP; the others are ready while they run, and the group
is ready when the head answers ``/health`` (it cannot before every rank joined).
"""

from __future__ import annotations

from sparksync.core.workloads.commands.common import (
    address,
    optional,
    process_readiness,
    require_model,
    serving_readiness,
    serving_tokens,
)
from sparksync.core.workloads.commands.context import GroupContext
from sparksync.core.workloads.launch_spec import RankLaunch
from sparksync.core.workloads.recipe import TokensSpec

TOKENS = TokensSpec(
    kind="prometheus",
    decode_counter="sglang:generation_tokens_total",
    prefill_counter="sglang:prompt_tokens_total",
    decode_gauge="sglang:gen_throughput",
    busy_gauge="sglang:num_running_reqs",
)


def build(ctx: GroupContext) -> list[RankLaunch]:
    return [rank(ctx, node) for node in ctx.nodes]


def rank(ctx: GroupContext, node: str) -> RankLaunch:
    recipe = ctx.recipe
    if node != ctx.head:
        return ctx.launch(node, "sglang", argv(ctx, node), process_readiness())
    ports = [recipe.ports.http] + ([recipe.ports.rendezvous] if ctx.size > 1 else [])
    return ctx.launch(
        node,
        "sglang",
        argv(ctx, node),
        serving_readiness(ctx),
        ports=ports,
        tokens=serving_tokens(ctx, TOKENS),
    )


def argv(ctx: GroupContext, node: str) -> list[str]:
    recipe, par = ctx.recipe, ctx.recipe.parallelism
    return [
        recipe.python, "-m", "sglang.launch_server", "--model-path", require_model(recipe),
        *optional("--served-model-name", recipe.served_name),
        "--host", recipe.http_host, "--port", str(recipe.ports.http), "--tp", str(par.tensor),
        *(optional("--pp-size", par.pipeline) if par.pipeline > 1 else []),
        *_multi_node(ctx, node), "--enable-metrics", *recipe.extra_args,
    ]  # fmt: skip


def _multi_node(ctx: GroupContext, node: str) -> list[str]:
    if ctx.size == 1:
        return []
    return [
        "--nnodes", str(ctx.size), "--node-rank", str(ctx.rank_of(node)),
        "--dist-init-addr", address(ctx.head_ip, ctx.recipe.ports.rendezvous),
    ]  # fmt: skip
