"""Start, probe and stop real llama.cpp processes in tests.

Each process writes its output to a log file (a pipe nobody reads would fill
and stall the engine), and every failure message carries that log's tail.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

STOP_GRACE_S = 5.0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class EngineProcess:
    """One running engine binary with its log."""

    proc: subprocess.Popen
    log_path: Path
    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, n_chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n_chars:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period; always reaps the process."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc.wait()


@contextmanager
def running(cmd: list[str], log_path: Path, port: int) -> Iterator[EngineProcess]:
    """Run ``cmd`` for the duration of the block, stopping it however the block ends."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    engine = EngineProcess(proc, log_path, port)
    try:
        yield engine
    finally:
        engine.stop()


def wait_http_ready(engine: EngineProcess, path: str = "/health", timeout: float = 60.0) -> None:
    """Poll ``path`` until it answers 200; fail early with the log when the process dies."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if engine.proc.poll() is not None:
            raise AssertionError(f"engine exited with {engine.proc.returncode} before it was ready:\n"
                                 f"{engine.log_tail()}")
        try:
            if httpx.get(engine.base_url + path, timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass  # not listening yet
        time.sleep(0.1)
    raise AssertionError(f"engine not ready on {path} after {timeout:.0f} s:\n{engine.log_tail()}")


def wait_port_open(engine: EngineProcess, timeout: float = 30.0) -> None:
    """Wait for a plain TCP listener (rpc-server speaks no HTTP)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if engine.proc.poll() is not None:
            raise AssertionError(f"process exited with {engine.proc.returncode}:\n{engine.log_tail()}")
        try:
            with socket.create_connection(("127.0.0.1", engine.port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on port {engine.port} after {timeout:.0f} s:\n{engine.log_tail()}")


@dataclass
class ChatStream:
    """What one streamed chat completion delivered."""

    pieces: list[str] = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    usage: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "".join(self.pieces)


def stream_chat(base_url: str, model: str, prompt: str, max_tokens: int = 64) -> ChatStream:
    """Stream one chat completion and collect its content deltas, timings and usage."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "stream": True,
        "max_tokens": max_tokens,
        # A random model may pick the end token at any step; the tests need a known length.
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    result = ChatStream()
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body, timeout=120.0) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                _absorb_chunk(result, json.loads(line[len("data: "):]))
    return result


def _absorb_chunk(result: ChatStream, chunk: dict) -> None:
    for choice in chunk.get("choices") or []:
        content = (choice.get("delta") or {}).get("content")
        if content:
            result.pieces.append(content)
    result.timings = chunk.get("timings") or result.timings
    result.usage = chunk.get("usage") or result.usage


def list_models(base_url: str) -> list[dict]:
    """The OpenAI-style ``/v1/models`` entries the server announces."""
    return httpx.get(f"{base_url}/v1/models", timeout=5.0).raise_for_status().json()["data"]


def read_metric(base_url: str, name: str) -> float:
    """One unlabelled sample from the engine's Prometheus text exposition."""
    text = httpx.get(f"{base_url}/metrics", timeout=5.0).raise_for_status().text
    match = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})?\s+(\S+)$", text, re.MULTILINE)
    if match is None:
        raise AssertionError(f"metric {name} missing from /metrics:\n{text[:1000]}")
    return float(match.group(1))


@dataclass(frozen=True)
class SocketBytes:
    received: int
    sent: int


def listener_traffic(port: int) -> SocketBytes:
    """Bytes through the established TCP connections accepted on local ``port``.

    ``/proc/PID/io`` cannot show this: rpc-server uses recv()/send(), which
    its rchar/wchar counters skip. The kernel's per-socket tcp_info can, and
    ``ss -i`` (iproute2) prints it.
    """
    out = subprocess.run(["ss", "-Htin", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True, check=True).stdout
    received = sum(int(n) for n in re.findall(r"bytes_received:(\d+)", out))
    sent = sum(int(n) for n in re.findall(r"bytes_acked:(\d+)", out))
    return SocketBytes(received, sent)
