"""What the client sends a node's agent to start one rank of a workload.

The models live in the wire protocol (``sparksync_agent.protocol``), since
the agent's process supervisor receives them; this module re-exports them
under the names the client-side workload code has always used.

Launch order: every launch of a group carries a ``stage``. The launches of
stage 0 start first and must all be ready before stage 1 starts, and so on
(an ``rpc-server`` before the ``llama-server`` that connects to it; a Ray
head, then its workers, then ``vllm serve``).
"""

from __future__ import annotations

from sparksync_agent.protocol import (
    LOG_GROUPS,
    NO_TOKENS,
    TOKENS_GROUP,
    RankLaunch,
    RankStart,
    ReadinessProbe,
    RestartPolicy,
    TokensSource,
)

__all__ = [
    "LOG_GROUPS",
    "NO_TOKENS",
    "TOKENS_GROUP",
    "RankLaunch",
    "RankStart",
    "ReadinessProbe",
    "RestartPolicy",
    "TokensSource",
]
