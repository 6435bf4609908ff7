"""Pieces every engine's builder shares: checks, probes and tokens sources."""

from __future__ import annotations

from collections.abc import Iterator

from sparksync.core.workloads.commands.context import GroupContext
from sparksync.core.workloads.errors import RecipeError
from sparksync.core.workloads.launch_spec import ReadinessProbe, TokensSource
from sparksync.core.workloads.recipe import Recipe, TokensSpec

WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]")

# Ray prints this once the node has joined the cluster (ray start, head and worker alike).
RAY_STARTED = r"Ray runtime started\."
# nanochat's training line: "step 00009/00010 (90.00%) | loss: 7.620000 | ... | tok/sec: 4,649 | ...".
NANOCHAT_TOKENS = (
    r"step (?P<step>\d+)/\d+\b.*?\| loss: (?P<loss>[-+0-9.eE]+|nan|inf)\b"
    r".*?\| tok/sec: (?P<tokens_per_s>[0-9][0-9,]*(?:\.[0-9]+)?)"
)
NANOCHAT_STEP = r"step \d+/\d+"


def unfilled(recipe: Recipe) -> Iterator[str]:
    """Fields a built-in left as '<...>' templates for the user to fill."""
    values = {"model": recipe.model, "training.script": recipe.training.script,
              "training.workdir": recipe.training.workdir or ""}  # fmt: skip
    values.update({f"custom.argv[{i}]": a for i, a in enumerate(recipe.custom.argv)})
    for name, value in values.items():
        if value.startswith("<") and value.endswith(">"):
            yield f"{name} ({value})"


def check_filled(recipe: Recipe) -> None:
    missing = list(unfilled(recipe))
    if missing:
        raise RecipeError(
            f"recipe {recipe.name!r} is a template: fill in {', '.join(missing)}, then launch it "
            "(save a copy with your values under a name of your own)."
        )


def require_model(recipe: Recipe) -> str:
    if not recipe.model:
        raise RecipeError(
            f"recipe {recipe.name!r} names no model: set 'model' to a path on the nodes or a model name."
        )
    return recipe.model


def probe_host(ctx: GroupContext) -> str:
    """Where the head's agent reaches the HTTP API: loopback unless it listens on one address only."""
    host = ctx.recipe.http_host
    return "127.0.0.1" if host in WILDCARD_HOSTS else host


def serving_readiness(ctx: GroupContext, path: str = "/health") -> ReadinessProbe:
    """The recipe's own probe, else GET ``path`` on the engine's HTTP port."""
    spec = ctx.recipe.readiness
    if spec is not None:
        return spec.probe(probe_host(ctx), ctx.recipe.ports.http)
    return ReadinessProbe(kind="http", host=probe_host(ctx), port=ctx.recipe.ports.http, path=path)


def serving_tokens(ctx: GroupContext, default: TokensSpec) -> TokensSource:
    """The recipe's own tokens source, else the engine's; counters are read on the HTTP port."""
    spec = ctx.recipe.tokens or default
    return spec.source(probe_host(ctx), ctx.recipe.ports.http)


def process_readiness() -> ReadinessProbe:
    """For ranks that serve nothing themselves: ready while running (their head says the rest)."""
    return ReadinessProbe(kind="process")


def address(host: str, port: int) -> str:
    return f"{host}:{port}"


def optional(flag: str, value: object | None) -> list[str]:
    """``[flag, value]`` when a value is set, else nothing."""
    return [] if value is None else [flag, str(value)]
