"""Mixed traffic: aggregate throughput with a ¼ share routed to the large model, against all-large, on the lab.

The published prototype saw about 3.0× more aggregate throughput when a
quarter of the requests went to the large model than when all did. Here:
the small tiny model on one lab node and the ten-times-slower large one on
another, each a llama.cpp workload started through the agents; the gateway's
pools name the workloads (``WorkloadPools``, over SSH tunnels). The same
request set is played at the same concurrency through a gateway with
``large_share = 1/4`` and through one with ``large_share = 1`` (the anchor,
measured in the same run), alternating; the ratio of the median output
tokens/s is printed. Two lab nodes with one thread each are not eight
Sparks, so the ratio is reported, not held to the published figure.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import httpx
import pytest

from sparksync.core.workloads.reach import TunnelReach
from sparksync.switchyard.server import GatewayThread
from sparksync.switchyard.workload_pools import WorkloadPools
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.engines.tinymodel import LARGE
from tests.lab.test_fleet_lab import agent_python, client_key, lab_agents  # noqa: F401  (fixtures)
from tests.lab.test_switchyard_lab import gateway_config, two_models
from tests.lab.test_workloads_lab import binaries  # noqa: F401  (a fixture)
from tests.perf.report import Report

pytestmark = [pytest.mark.perf, pytest.mark.lab, pytest.mark.engine]

ROUNDS = 2
CONCURRENCY = 4
MAX_TOKENS = 32


async def play(url: str, requests: int) -> tuple[int, float]:
    """``requests`` chat completions, CONCURRENCY at a time; (output tokens, seconds)."""
    body = {"model": "switchyard", "messages": [{"role": "user", "content": "tell me about the cluster"}],
            "max_tokens": MAX_TOKENS, "ignore_eos": True}  # fmt: skip
    gate = asyncio.Semaphore(CONCURRENCY)
    async with httpx.AsyncClient(timeout=600, trust_env=False) as client:

        async def one() -> int:
            async with gate:
                answer = await client.post(url + "/v1/chat/completions", json=body)
                answer.raise_for_status()
                return answer.json()["usage"]["completion_tokens"]

        began = time.perf_counter()
        tokens = await asyncio.gather(*(one() for _ in range(requests)))
        return sum(tokens), time.perf_counter() - began


def throughput(models, share: str, requests: int) -> float:
    config = gateway_config(models.small.workload_id, models.large.workload_id, share, LARGE.name)
    source = WorkloadPools(config, models.store.list, TunnelReach(models.fleet))
    with GatewayThread(config, source) as gw:
        tokens, seconds = asyncio.run(play(gw.url, requests))
    return tokens / seconds


def test_a_quarter_share_to_the_large_model_against_all_large(lab_agents, client_key, binaries, durations,  # noqa: F811
                                                              perf_out):  # fmt: skip
    requests = max(8, int(32 * durations.scale))
    report = Report("switchyard_mixed_traffic")
    mixed, large_only = [], []
    with two_models(lab_agents, client_key, binaries, large=LARGE, parallel=CONCURRENCY) as models:
        for _ in range(ROUNDS):
            mixed.append(throughput(models, "1/4", requests))
            large_only.append(throughput(models, "1", requests))
    ratio = statistics.median(mixed) / statistics.median(large_only)
    report.figure("requests", requests, "requests per measurement")
    report.figure("concurrency", CONCURRENCY, "concurrency")
    report.figure("mixed_tps", statistics.median(mixed), "1/4 large: aggregate output", "tok/s")
    report.figure(
        "large_only_tps", statistics.median(large_only), "all large (anchor): aggregate output", "tok/s"
    )
    report.figure("ratio", ratio, "gain over all-large (published: about 3.0x)", "x")
    report.publish(perf_out)
    assert mixed and large_only and all(v > 0 for v in mixed + large_only)
