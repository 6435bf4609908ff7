"""Run a model on this computer: the dashboard's first-run flow, Qt-free.

A newcomer without a Spark picks a GGUF file (or lets SparkSync write its
tiny demo model), starts it on this computer through the local agent, as
any node would run it, and makes it generate so its tokens/s shows live::

    state = engine_here(control)                 # is llama.cpp on this computer? (its path, or why not)
    model = write_demo_model()                   # sparksync.core.engines; or a GGUF the user picked
    view = start_here(control, model)            # llamacpp-single on this computer, on a free port
    done = generate_for(url_of(view), 30.0)      # chat completions back to back: tokens flow

The tokens/s itself comes from the engine's own counters, read by the
local agent into its telemetry, like on a node.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from sparksync.core.agents.this_computer import LOCAL_NODE_NAME
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.workloads.errors import WorkloadError
from sparksync.core.workloads.launch_choice import LaunchChoice
from sparksync.core.workloads.orchestrator import ProgressCallback
from sparksync.core.workloads.running import WorkloadView
from sparksync.core.workloads.workload_control import WorkloadControl

RECIPE = "llamacpp-single"
ENGINE = "llama.cpp"
PROMPT = "Tell me about the cluster, the nodes and their memory."
ANSWER_TOKENS = 256
REQUEST_TIMEOUT_S = 120.0
CONTEXT = 4096  # tokens: plenty for a try, light on a laptop's memory


@dataclass(frozen=True)
class EngineHere:
    """Whether this computer can run llama.cpp, with where it is or what it lacks."""

    present: bool
    detail: str


@dataclass(frozen=True)
class Generated:
    """What ``generate_for`` made: answers, tokens, and their rate as the engine timed it."""

    answers: int
    tokens: int
    tokens_per_s: float | None
    last_text: str


def engine_here(control: WorkloadControl, refresh: bool = False) -> EngineHere:
    """llama.cpp on this computer, as its agent finds it (the engine cache is on the agent's PATH)."""
    answer = control.engines([LOCAL_NODE_NAME], refresh)[LOCAL_NODE_NAME]
    if isinstance(answer, SparkSyncError):
        raise answer
    if answer.engines.get(ENGINE):
        found = next((c for c in answer.checks if c.name == "llama-server" and c.available), None)
        return EngineHere(True, (found.path or "llama-server") if found is not None else "llama-server")
    needs = " or ".join(answer.missing.get(ENGINE, ["llama-server"]))
    return EngineHere(False, f"needs {needs}: install llama.cpp here (a build of a few minutes)")


def choice_here(model: Path | str, port: int | None = None) -> LaunchChoice:
    """llamacpp-single on this computer with ``model``, on ``port`` (default: a free one).

    It leaves this computer half its cores: llama.cpp's threads spin while they
    wait, so taking every core of a desktop that runs other things slows it
    down (on two busy cores, to a few tokens/s).
    """
    threads = max(1, (os.cpu_count() or 2) // 2)
    return LaunchChoice(recipe=RECIPE, nodes=[LOCAL_NODE_NAME], model=str(model), http_port=port or free_port(),
                        settings={"llamacpp": {"threads": threads, "context": CONTEXT}})  # fmt: skip


def start_here(
    control: WorkloadControl,
    model: Path | str,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> WorkloadView:
    """Start ``model`` on this computer; returns once the engine answers (all or nothing)."""
    if not Path(model).is_file():
        raise WorkloadError(f"{model} is not a file; pick a .gguf model file, or use the demo model.")
    return control.start(choice_here(model), on_progress, cancel)


def url_of(view: WorkloadView) -> str:
    """The engine's HTTP root on this computer (``http://127.0.0.1:PORT``)."""
    endpoint = next((e for e in view.record.endpoints if e.node == LOCAL_NODE_NAME), None)
    if endpoint is None:
        raise WorkloadError(f"workload {view.workload_id} serves no HTTP endpoint on this computer.")
    host = "127.0.0.1" if endpoint.host in ("0.0.0.0", "::", "") else endpoint.host
    return f"http://{host}:{endpoint.port}"


def generate_for(
    url: str,
    seconds: float,
    cancel: threading.Event | None = None,
    prompt: str = PROMPT,
    max_tokens: int = ANSWER_TOKENS,
) -> Generated:
    """Ask for answers back to back for ``seconds`` (or until ``cancel``): the engine's tokens/s then shows."""
    cancel = cancel or threading.Event()
    deadline = time.monotonic() + seconds
    answers = tokens = 0
    rate, text = None, ""
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "stream": False}
    with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as http:
        while not cancel.is_set() and time.monotonic() < deadline:
            try:
                reply = http.post("/v1/chat/completions", json=body)
            except httpx.HTTPError as exc:
                if cancel.is_set():
                    break  # stopped meanwhile (the model too, perhaps): what was made stands
                raise WorkloadError(f"the model at {url} did not answer ({exc}); is it still running?") from exc
            if reply.status_code != 200:
                raise WorkloadError(f"the model at {url} answered HTTP {reply.status_code}: {reply.text[:200]}")
            data = reply.json()
            answers += 1
            tokens += int((data.get("usage") or {}).get("completion_tokens") or 0)
            rate = (data.get("timings") or {}).get("predicted_per_second", rate)
            text = data["choices"][0]["message"].get("content") or text
    return Generated(answers, tokens, rate, text)


def free_port() -> int:
    """A TCP port free on this computer's loopback now (the engine binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
