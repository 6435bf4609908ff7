"""A real ``sparksync-agent serve`` process on loopback, for tests and benchmarks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

STARTUP_TIMEOUT_S = 20.0


@dataclass
class RunningAgent:
    proc: subprocess.Popen
    state_dir: Path
    port: int
    token: str
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, token: str | None = None) -> httpx.Client:
        token = self.token if token is None else token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=10.0)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 5.0) -> float:
        """SIGTERM and wait; returns how long the agent took to exit."""
        if self.proc.poll() is not None:
            return 0.0
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return time.monotonic() - started


def start_agent(state_dir: Path, log_path: Path, *extra: str, wait: bool = True) -> RunningAgent | subprocess.Popen:
    argv = [sys.executable, "-m", "sparksync_agent", "serve", "--state-dir", str(state_dir), *extra]
    if "--port" not in extra:
        argv += ["--port", "0"]
    log = open(log_path, "wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy())
    log.close()
    if not wait:
        return proc
    return _wait_ready(proc, state_dir, log_path)


def _wait_ready(proc: subprocess.Popen, state_dir: Path, log_path: Path) -> RunningAgent:
    endpoint_file = state_dir / "endpoint.json"
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"agent exited with {proc.returncode}:\n{log_path.read_text()}")
        if endpoint_file.exists():
            endpoint = json.loads(endpoint_file.read_text())
            if endpoint["pid"] == proc.pid:
                token = (state_dir / "token").read_text().strip()
                return RunningAgent(proc, state_dir, endpoint["port"], token, log_path)
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise AssertionError(f"agent did not publish its endpoint in time:\n{log_path.read_text()}")
