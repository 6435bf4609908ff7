"""A custom command: the recipe's argv on every node (or the head only), with placeholders filled.

Placeholders: {rank} {nnodes} {group} {node_ip} {head_ip} {http_port}
{rendezvous_port}. Any other text in braces is left as written, so JSON or
shell snippets in arguments survive.
"""

from __future__ import annotations

import re

from sparksync.core.workloads.commands.common import probe_host, process_readiness
from sparksync.core.workloads.commands.context import GroupContext
from sparksync.core.workloads.errors import RecipeError
from sparksync.core.workloads.launch_spec import RankLaunch, ReadinessProbe, TokensSource

_PLACEHOLDER = re.compile(r"\{(rank|nnodes|group|node_ip|head_ip|http_port|rendezvous_port)\}")


def build(ctx: GroupContext) -> list[RankLaunch]:
    if not ctx.recipe.custom.argv:
        raise RecipeError(f"recipe {ctx.recipe.name!r} has no command: set custom.argv.")
    nodes = ctx.nodes[:1] if ctx.recipe.custom.head_only else ctx.nodes
    return [rank(ctx, node) for node in nodes]


def rank(ctx: GroupContext, node: str) -> RankLaunch:
    values = placeholders(ctx, node)
    argv = [_PLACEHOLDER.sub(lambda m: values[m[1]], part) for part in ctx.recipe.custom.argv]
    head = node == ctx.head
    return ctx.launch(
        node, "custom", argv, readiness(ctx) if head else process_readiness(), tokens=tokens(ctx, head)
    )


def placeholders(ctx: GroupContext, node: str) -> dict[str, str]:
    return {
        "rank": str(ctx.rank_of(node)),
        "nnodes": str(ctx.size),
        "group": ctx.group,
        "node_ip": ctx.ips[node],
        "head_ip": ctx.head_ip,
        "http_port": str(ctx.recipe.ports.http),
        "rendezvous_port": str(ctx.recipe.ports.rendezvous),
    }


def readiness(ctx: GroupContext) -> ReadinessProbe:
    spec = ctx.recipe.readiness
    return process_readiness() if spec is None else spec.probe(probe_host(ctx), ctx.recipe.ports.http)


def tokens(ctx: GroupContext, head: bool) -> TokensSource:
    """A 'workload' figure is read on the head only; 'rank' figures on every rank."""
    spec = ctx.recipe.tokens
    if spec is None or (spec.scope == "workload" and not head):
        return TokensSource()
    return spec.source(probe_host(ctx), ctx.recipe.ports.http)
