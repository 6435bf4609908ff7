"""Tiny llama-server replicas for the Switchyard tests (flags as in /work/shared/LAB.md)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from tests.engines.engine_procs import EngineProcess, free_port, running, wait_http_ready


def server_cmd(binaries, model, port: int, threads: int = 1, slots: int = 2, ctx: int = 4096,
               ignore_eos: bool = False) -> list[str]:  # fmt: skip
    # ignore_eos: a random-weight model samples its end token now and then; a test of the
    # length cap needs every answer to run to max_tokens.
    return [
        str(binaries.llama_server),
        "-m",
        str(model.gguf),
        "--alias",
        model.name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-c",
        str(ctx),
        "-np",
        str(slots),
        "-t",
        str(threads),
        "--metrics",
        *(["--ignore-eos"] if ignore_eos else []),
    ]


@contextmanager
def replicas(binaries, model, log_dir: Path, count: int, **flags) -> Iterator[list[EngineProcess]]:
    """``count`` llama-servers on ``model``, ready to serve; all stopped on exit."""
    with ExitStack() as stack:
        servers = []
        for i in range(count):
            port = free_port()
            log = log_dir / f"{model.name}-{i}-{port}.log"
            servers.append(
                stack.enter_context(running(server_cmd(binaries, model, port, **flags), log, port))
            )
        for server in servers:
            wait_http_ready(server, "/health")
        yield servers
