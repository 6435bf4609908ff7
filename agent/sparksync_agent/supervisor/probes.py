"""Readiness probes for a starting rank: HTTP, TCP, a log line, or just 'running'."""

from __future__ import annotations

import asyncio
import re
import urllib.error
import urllib.request

from sparksync_agent.protocol import ReadinessProbe

ATTEMPT_TIMEOUT_S = 2.0
# A direct opener: a proxy from the environment must never see loopback probes.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_ok(url: str, timeout: float = ATTEMPT_TIMEOUT_S) -> bool:
    try:
        with _OPENER.open(url, timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def fetch_text(url: str, timeout: float = ATTEMPT_TIMEOUT_S) -> str:
    with _OPENER.open(url, timeout=timeout) as response:
        return response.read().decode("utf-8", errors="replace")


async def tcp_open(host: str, port: int, timeout: float = ATTEMPT_TIMEOUT_S) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return True


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def probe_network(probe: ReadinessProbe) -> bool:
    """One attempt of an http or tcp probe."""
    if probe.kind == "http":
        url = f"http://{_url_host(probe.host)}:{probe.port}{probe.path}"
        return await asyncio.to_thread(http_ok, url)
    if probe.kind == "tcp" and probe.port is not None:  # a tcp probe always has one (validated)
        return await tcp_open(probe.host, probe.port)
    return False


class LogReadiness:
    """Watches output lines for the probe's pattern."""

    def __init__(self, pattern: str):
        self._regex = re.compile(pattern)
        self.matched = False

    def feed(self, text: str) -> None:
        if not self.matched and self._regex.search(text):
            self.matched = True
