"""What every command builder gets: one group, its nodes' addresses and fabric environment."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sparksync.core.workloads.launch_spec import NO_TOKENS, RankLaunch, ReadinessProbe, TokensSource
from sparksync.core.workloads.recipe import Recipe


@dataclass(frozen=True)
class GroupContext:
    """One replica: its recipe, its nodes in rank order, their fabric IPs and environment.

    ``ips`` holds each node's fabric IP (loopback for a one-node group);
    ``fabric_env`` the per-node variables from ``fabric.fabric_env`` (empty
    for a one-node group, which talks to nobody).
    """

    group: str
    recipe: Recipe
    nodes: tuple[str, ...]
    ips: Mapping[str, str]
    fabric_env: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.nodes)

    @property
    def head(self) -> str:
        return self.nodes[0]

    @property
    def head_ip(self) -> str:
        """The rendezvous address: the first node's fabric IP."""
        return self.ips[self.head]

    def rank_of(self, node: str) -> int:
        return self.nodes.index(node)

    def env(self, node: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Fabric, then the engine's own variables, then the recipe's (the user has the last word)."""
        return {**self.fabric_env.get(node, {}), **(extra or {}), **self.recipe.env}

    def launch(
        self,
        node: str,
        role: str,
        argv: Sequence[str],
        readiness: ReadinessProbe,
        *,
        stage: int = 0,
        ports: Sequence[int] = (),
        tokens: TokensSource = NO_TOKENS,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stop_argv: Sequence[str] = (),
    ) -> RankLaunch:
        rank = self.rank_of(node)
        return RankLaunch(
            group=self.group, node=node, rank=rank, role=role, stage=stage, argv=list(argv),
            env=dict(env if env is not None else self.env(node)), cwd=cwd, ports=list(ports),
            readiness=readiness, tokens_source=tokens, log_name=f"{self.group}.{rank}.{role}.log",
            stop_argv=list(stop_argv),
        )  # fmt: skip
