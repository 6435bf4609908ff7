"""torchrun: any training script, one launcher per node, rendezvous at the first node.

Documentation these commands follow (docs.pytorch.org/docs/stable/elastic/run.html,
"torchrun (Elastic Launch)"):

- multi-node, static rendezvous: ``torchrun --nnodes=N --nproc-per-node=G
  --node-rank=R --master-addr=<first node> --master-port=P script args`` on
  every node (the underscore spellings ``--nproc_per_node`` etc. are accepted
  alike);
- or c10d rendezvous: ``--rdzv-backend=c10d --rdzv-endpoint=host:port
  --rdzv-id=<job id>``, where ranks are assigned at rendezvous;
- one node: ``--standalone`` (a local rendezvous on a free port);
- ``-m``/``--module`` runs the script as a module: nanochat's
  ``torchrun ... -m scripts.base_train`` from its checkout (karpathy/nanochat
  README, speedrun.sh).

Where the rendezvous listens: ``--local_addr <fabric IP>`` makes every node
name itself by its fabric address, so the ranks meet over the fabric, and
``--master_addr`` / ``--rdzv-endpoint`` is the head's fabric address. The
rendezvous store itself (torch's TCPStore on the head, port
``ports.rendezvous``) has no authentication and torch offers no way to bind
it to one address: it listens on every interface of the head while the job
starts. Keep that port closed to anything but the fabric (docs/recipes.md).

Tokens/s come from the log lines; nanochat prints
``step 00009/00010 (90.00%) | loss: ... | tok/sec: 4,649 | ...``.
"""

from __future__ import annotations

from sparksync.core.workloads.commands.common import (
    NANOCHAT_STEP,
    NANOCHAT_TOKENS,
    address,
    probe_host,
    process_readiness,
)
from sparksync.core.workloads.commands.context import GroupContext
from sparksync.core.workloads.errors import RecipeError
from sparksync.core.workloads.launch_spec import RankLaunch, ReadinessProbe, TokensSource
from sparksync.core.workloads.recipe import TokensSpec

TOKENS = TokensSpec(kind="log", pattern=NANOCHAT_TOKENS, scope="rank")
NANOCHAT_READY = ReadinessProbe(kind="log", pattern=NANOCHAT_STEP, timeout_s=1800)


def build(ctx: GroupContext) -> list[RankLaunch]:
    script = ctx.recipe.training.script
    if not script:
        raise RecipeError(
            f"recipe {ctx.recipe.name!r} names no training script: set training.script (a path, or a "
            "module with training.module true)."
        )
    return [rank(ctx, node) for node in ctx.nodes]


def rank(ctx: GroupContext, node: str) -> RankLaunch:
    training = ctx.recipe.training
    ports = [ctx.recipe.ports.rendezvous] if node == ctx.head and ctx.size > 1 else []
    return ctx.launch(
        node, "torchrun", argv(ctx, node), readiness(ctx), ports=ports, tokens=tokens(ctx, node),
        cwd=training.workdir or None,
    )  # fmt: skip


def argv(ctx: GroupContext, node: str) -> list[str]:
    training = ctx.recipe.training
    script = ["-m", training.script] if training.module else [training.script]
    return [
        training.launcher, *_rendezvous(ctx, node), *ctx.recipe.extra_args, *script, *training.args,
    ]  # fmt: skip


def _rendezvous(ctx: GroupContext, node: str) -> list[str]:
    procs = ["--nproc_per_node", str(ctx.recipe.training.nproc_per_node)]
    if ctx.size == 1:
        return ["--standalone", *procs]
    endpoint, port = ctx.head_ip, str(ctx.recipe.ports.rendezvous)
    local = ["--local_addr", ctx.ips[node]]  # this node's fabric address, as the others reach it
    if ctx.recipe.training.rendezvous == "c10d":
        return [
            "--nnodes", str(ctx.size), *procs, "--rdzv-backend", "c10d",
            "--rdzv-endpoint", address(endpoint, int(port)), "--rdzv-id", ctx.group, *local,
        ]  # fmt: skip
    return [
        "--nnodes", str(ctx.size), *procs, "--node_rank", str(ctx.rank_of(node)),
        "--master_addr", endpoint, "--master_port", port, *local,
    ]  # fmt: skip


def readiness(ctx: GroupContext) -> ReadinessProbe:
    spec = ctx.recipe.readiness
    if spec is None:
        return process_readiness()
    return spec.probe(probe_host(ctx), ctx.recipe.ports.http)


def tokens(ctx: GroupContext, node: str) -> TokensSource:
    """A 'workload' figure (nanochat's global tok/sec) is read on rank 0 only; 'rank' figures on all."""
    spec = ctx.recipe.tokens or TOKENS
    if spec.scope == "workload" and node != ctx.head:
        return TokensSource()
    return spec.source(probe_host(ctx), ctx.recipe.ports.http)
