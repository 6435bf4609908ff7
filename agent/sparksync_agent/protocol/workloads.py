"""Workloads: what the client sends to start a rank, what the agent reports, and engine detection."""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Literal

from pydantic import Field, model_validator

from sparksync_agent.protocol.base import WireModel

# --- workloads: what the client sends to start one rank ----------------------
#
# The agent's process supervisor receives one ``RankLaunch`` per process and
# needs nothing else to start it, tell when it is ready, and read its tokens/s.
#
# Launch order: every launch of a group carries a ``stage``. The launches of
# stage 0 start first and must all be ready before stage 1 starts, and so on
# (an ``rpc-server`` before the ``llama-server`` that connects to it; a Ray
# head, then its workers, then ``vllm serve``). The client drives the stages.

# Named groups a training log pattern may capture; tokens_per_s is required.
TOKENS_GROUP = "tokens_per_s"
LOG_GROUPS = (TOKENS_GROUP, "step", "loss")

# Workload ids and process names become directory names on the node.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$"

Port = Annotated[int, Field(ge=1, le=65535)]


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
    port: Port | None = None
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
      from ``prefill_counter``); with ``slots_path`` (llama-server's
      ``/slots``) decode follows each slot's ``n_decoded`` as tokens are
      generated, because llama.cpp's counter only grows when a request ends;
      with ``decode_gauge`` (a tokens/s gauge the engine sets as it decodes,
      SGLang's ``sglang:gen_throughput``) decode reads that gauge while
      ``busy_gauge`` (its running requests) is above zero, since SGLang's
      counter too only grows when a request ends and the gauge keeps its last
      value when idle;
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
    port: Port | None = None
    path: str = "/metrics"
    decode_counter: str | None = None
    prefill_counter: str | None = None
    slots_path: str | None = None
    decode_gauge: str | None = None
    busy_gauge: str | None = None
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


class RestartPolicy(WireModel):
    """Whether the agent starts a rank again when it fails, and when it gives up.

    A failure is an exit the agent did not ask for (any exit for a server; a
    non-zero one for a job). Restarts wait ``backoff_s``, doubling per failure
    in the window up to ``backoff_max_s``; ``max_failures`` failures within
    ``window_s`` seconds end it with the state ``failed``.
    """

    mode: Literal["never", "on-failure"] = "never"
    max_failures: int = Field(3, ge=1, le=1000)
    window_s: float = Field(300.0, gt=0)
    backoff_s: float = Field(1.0, ge=0)
    backoff_max_s: float = Field(60.0, ge=0)


class RankLaunch(WireModel):
    """One process of a workload, started by ``node``'s agent.

    ``env`` is set on top of the agent's own environment. ``rank`` is the
    node's rank within its group (0 is the head); a node may run more than
    one process (a Ray head and ``vllm serve``), told apart by ``role``.
    ``stop_argv``, when given, is run after the process is signalled, for
    engines whose real work lives outside the process group (a container).
    Without ``cwd`` the process runs in its own directory under the agent's
    state directory (where its log is). ``restart`` says whether the agent
    starts it again when it fails.
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
    restart: RestartPolicy = Field(default_factory=RestartPolicy)

    @property
    def process_name(self) -> str:
        """How this process is called on its node: unique within its workload there."""
        return f"{self.group}.{self.rank}.{self.role}"


def _compile(pattern: str | None, what: str) -> re.Pattern[str]:
    if not pattern:
        raise ValueError(f"a log {what} is needed")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"the {what} {pattern!r} is not a valid regular expression ({exc})") from None


class RankStart(WireModel):
    """``POST /v1/workloads``: start ``launch`` as part of workload ``workload_id`` on this node.

    The agent refuses a workload id or process name that does not match
    ``NAME_PATTERN``: both name directories on the node.
    """

    workload_id: str
    launch: RankLaunch


# --- workloads: what the agent reports -------------------------------------


class RankState(str, Enum):
    starting = "starting"  # running, readiness probe not yet passed
    ready = "ready"
    restarting = "restarting"  # failed; waiting out the backoff before the next attempt
    stopping = "stopping"
    stopped = "stopped"  # ended because it was asked to
    exited = "exited"  # ended by itself with status 0 (a job that finished)
    failed = "failed"  # ended by itself otherwise, never got ready, or restarts gave up
    lost = "lost"  # ended while no agent watched, and its exit status is unknown

    @property
    def finished(self) -> bool:
        return self in (RankState.stopped, RankState.exited, RankState.failed, RankState.lost)


class RankStatus(WireModel):
    workload_id: str
    name: str = Field(description="The process name on this node: '<group>.<rank>.<role>'.")
    group: str
    rank: int
    role: str
    state: RankState
    pid: int | None = Field(None, description="The rank's process group leader while it runs.")
    attempt: int = Field(1, description="1 for the first start, +1 per restart.")
    started_at: float | None = None
    ready_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = Field(None, description="The command's exit status, when it exited.")
    exit_signal: int | None = Field(None, description="The signal that ended it, when one did.")
    message: str | None = Field(None, description="Why it failed, gave up or was lost, for people.")
    last_lines: list[str] = Field(default_factory=list, description="The last log lines, on failure.")
    log_last_seq: int = 0
    ports: list[int] = Field(default_factory=list)
    argv: list[str] = Field(default_factory=list)


class WorkloadStatus(WireModel):
    workload_id: str
    ranks: list[RankStatus]


class WorkloadList(WireModel):
    workloads: list[WorkloadStatus]


class LogLine(WireModel):
    seq: int = Field(ge=1)
    text: str


class LogPage(WireModel):
    """Lines of one process's output with seq > ``since``, oldest first."""

    workload_id: str
    name: str
    since: int
    lines: list[LogLine]
    last_seq: int
    lost: int = Field(0, description="Lines after 'since' that the agent's buffer no longer holds.")


class WorkloadFigures(WireModel):
    """One running rank's live figures, as they join the telemetry."""

    workload_id: str
    name: str
    group: str
    rank: int
    role: str
    state: RankState
    scope: Literal["rank", "workload"] = "rank"
    decode_tps: float | None = Field(None, description="Generated tokens per second (training: tokens/s).")
    prefill_tps: float | None = Field(None, description="Prompt tokens processed per second.")
    loss: float | None = None
    step: int | None = None


# --- engines ----------------------------------------------------------------


class EngineCheck(WireModel):
    """One thing an engine needs, found on this node or not (and why not)."""

    name: str = Field(description="e.g. 'llama-server', 'python:vllm', 'docker', 'image:nvcr.io/...'.")
    kind: Literal["binary", "python", "container-runtime", "container-image"]
    available: bool
    version: str | None = None
    path: str | None = None
    missing: str | None = Field(None, description="Why it is not available, for people.")


class EngineReport(WireModel):
    checked_at: float
    checks: list[EngineCheck]
    engines: dict[str, bool] = Field(
        default_factory=dict, description="Engine -> whether everything it needs was found."
    )
    missing: dict[str, list[str]] = Field(default_factory=dict, description="Engine -> what it lacks.")

