"""What the client sends a node's agent to start one rank of a workload.

These are wire models: the agent's process supervisor will receive one
``RankLaunch`` per process and needs nothing else to start it, tell when it
is ready, and read its tokens/s. They depend on pydantic and the protocol's
``WireModel`` only, so they can move into ``sparksync_agent/protocol.py``
unchanged when the supervisor lands.

Launch order: every launch of a group carries a ``stage``. The launches of
stage 0 start first and must all be ready before stage 1 starts, and so on
(an ``rpc-server`` before the ``llama-server`` that connects to it; a Ray
head, then its workers, then ``vllm serve``).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator
from sparksync_agent.protocol import WireModel

# Named groups a training log pattern may capture; tokens_per_s is required.
TOKENS_GROUP = "tokens_per_s"
LOG_GROUPS = (TOKENS_GROUP, "step", "loss")


class ReadinessProbe(WireModel):
    """How the agent tells that a rank is ready.

    - ``http``: GET ``http://host:port/path`` answers 200 (``/health``, ``/v1/models``);
    - ``tcp``: something accepts connections on ``host:port`` (``rpc-server`` speaks no HTTP);
    - ``log``: a line of the rank's output matches ``pattern`` (a Python regex);
    - ``process``: the process is running; used by ranks that serve nothing
      themselves and whose group is ready when its head is.
    """

    kind: Literal["http", "tcp", "log", "process"]
    host: str = "127.0.0.1"
    port: int | None = Field(None, ge=1, le=65535)
    path: str | None = None
    pattern: str | None = None
    timeout_s: float = Field(600.0, gt=0, description="Give up (and report the rank failed) after this.")
    interval_s: float = Field(0.5, gt=0)

    @model_validator(mode="after")
    def _complete(self) -> ReadinessProbe:
        if self.kind in ("http", "tcp") and self.port is None:
            raise ValueError(f"a {self.kind} readiness probe needs a port")
        if self.kind == "http" and not (self.path or "").startswith("/"):
            raise ValueError("an http readiness probe needs a path starting with '/', e.g. /health")
        if self.kind == "log":
            _compile(self.pattern, "readiness pattern")
        return self


class TokensSource(WireModel):
    """Where the agent reads a rank's tokens/s.

    - ``prometheus``: counters on ``http://host:port/path``; the agent turns
      them into a rate per second (decode from ``decode_counter``, prefill
      from ``prefill_counter``);
    - ``log``: lines matching ``pattern``, whose named group ``tokens_per_s``
      is a rate already (thousands separators allowed, as in nanochat's
      ``tok/sec: 4,649``); optional groups ``step`` and ``loss``;
    - ``none``: this rank reports no tokens.

    ``scope`` says how ranks combine: ``rank`` figures add up across the
    group's ranks; a ``workload`` figure already covers the whole group
    (nanochat prints the global batch's tokens/s on rank 0 only).
    """

    kind: Literal["prometheus", "log", "none"] = "none"
    host: str = "127.0.0.1"
    port: int | None = Field(None, ge=1, le=65535)
    path: str = "/metrics"
    decode_counter: str | None = None
    prefill_counter: str | None = None
    pattern: str | None = None
    scope: Literal["rank", "workload"] = "rank"

    @model_validator(mode="after")
    def _complete(self) -> TokensSource:
        if self.kind == "prometheus" and (self.port is None or not self.decode_counter):
            raise ValueError("a prometheus tokens source needs a port and a decode_counter")
        if self.kind == "log":
            compiled = _compile(self.pattern, "tokens pattern")
            if TOKENS_GROUP not in compiled.groupindex:
                raise ValueError(f"the tokens pattern needs a named group (?P<{TOKENS_GROUP}>...)")
        return self


NO_TOKENS = TokensSource()


class RankLaunch(WireModel):
    """One process of a workload, started by ``node``'s agent.

    ``env`` is set on top of the agent's own environment. ``rank`` is the
    node's rank within its group (0 is the head); a node may run more than
    one process (a Ray head and ``vllm serve``), told apart by ``role``.
    ``stop_argv``, when given, is run after the process is signalled, for
    engines whose real work lives outside the process group (a container).
    """

    group: str = Field(description="The group (one replica) this rank belongs to, e.g. 'qwen-1'.")
    node: str
    rank: int = Field(ge=0)
    role: str = Field(description="What this process is: 'llama-server', 'rpc-server', 'ray-head'...")
    stage: int = Field(0, ge=0)
    argv: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    ports: list[int] = Field(default_factory=list, description="Ports it listens on: checked free first.")
    readiness: ReadinessProbe
    tokens_source: TokensSource = Field(default_factory=TokensSource)
    log_name: str
    stop_argv: list[str] = Field(default_factory=list)


def _compile(pattern: str | None, what: str) -> re.Pattern[str]:
    if not pattern:
        raise ValueError(f"a log {what} is needed")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"the {what} {pattern!r} is not a valid regular expression ({exc})") from None
