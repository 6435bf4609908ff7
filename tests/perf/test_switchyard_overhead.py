"""What the Switchyard gateway adds to a stream: TTFT and aggregate tokens/s, beside nginx.

One tiny llama-server is measured three ways in the same run, in interleaved
rounds so drift hits all three alike: directly, through nginx (a plain
reverse proxy, the anchor) and through the gateway (its own process,
``sparksync switchyard serve``). At concurrency 1 and 32 it prints the added
TTFT (p50, p99), the tokens/s lost and the proxy's CPU per 1,000 tokens, ours
beside nginx's, writes them as JSON, then checks the issue's targets: added
TTFT p50 <= 2 ms and p99 <= 10 ms, tokens/s loss <= 3 %.

The engine gets CPU 0 to itself and the proxies and the load generator the
others (on a Spark the engine computes on the GPU, so the gateway's CPU never
slows it; on a small CPU box they would otherwise fight for the same cores).
The tiny model streams thousands of tokens a second, far more per stream than
a real model on a Spark: a harsh test of per-token cost.

The default run takes about a minute and a half; SPARKSYNC_PERF_SCALE scales it
(0.1 for a smoke run, 3 for steadier figures).
"""

from __future__ import annotations

import json

import pytest

from tests.engines.conftest import (  # noqa: F401  (fixtures this benchmark uses)
    _tiny_models_dir,
    _tiny_tokenizer,
    llama_binaries,
    tiny_model,
)
from tests.engines.engine_procs import free_port, running, wait_http_ready
from tests.perf.probes import percentile
from tests.perf.report import Report, assert_targets
from tests.perf.settings import Durations, scale_from_env
from tests.perf.switchyard_bench import (
    Window,
    cpus_split,
    nginx_binary,
    nginx_proxy,
    process_tree,
    run_windows,
    start_gateway_process,
)
from tests.switchyard.llama import server_cmd

pytestmark = [
    pytest.mark.perf,
    pytest.mark.engine,
    pytest.mark.timeout(Durations(scale_from_env()).timeout_s),
]

CONCURRENCIES = (1, 32)
ROUNDS = 3
MAX_TOKENS = 64
TTFT_P50_TARGET_MS = 2.0
TTFT_P99_TARGET_MS = 10.0
TPS_LOSS_TARGET = 0.03
TARGETS = ("direct", "nginx", "gateway")


def _gateway_config(path, engine_url: str, port: int):
    path.write_text(
        json.dumps(
            {
                "listen": {"host": "127.0.0.1", "port": port},
                "pools": {"small": {"urls": [engine_url]}, "large": {"urls": [engine_url]}},
                "policy": {"kind": "fixed_share", "small": "small", "large": "large", "large_share": 0},
            }
        )
    )
    return path


@pytest.fixture(scope="module")
def measured(llama_binaries, tiny_model, tmp_path_factory, durations) -> dict:  # noqa: F811
    if nginx_binary() is None:
        pytest.skip("nginx is not installed (apt-get install nginx; packaging/dev/system-deps.sh)")
    work = tmp_path_factory.mktemp("switchyard-overhead")
    window_s = max(1.0, durations.cpu_s / (len(CONCURRENCIES) * ROUNDS * len(TARGETS)) * 1.5)
    engine_port, gateway_port = free_port(), free_port()
    with running(
        server_cmd(llama_binaries, tiny_model, engine_port, threads=1, slots=32, ctx=32 * 512), work / "engine.log", engine_port
    ) as engine:
        wait_http_ready(engine, "/health")
        config = _gateway_config(work / "switchyard.json", engine.base_url, gateway_port)
        with (
            cpus_split(engine.proc.pid) as split,
            nginx_proxy(engine_port, work / "nginx") as nginx,
            start_gateway_process(config, gateway_port, work / "gateway.log") as gateway,
        ):
            wait_http_ready(gateway, "/health")
            targets = {
                "direct": (engine.base_url, tiny_model.name, []),
                "nginx": (nginx.base_url, tiny_model.name, process_tree(nginx.proc.pid)),
                "gateway": (gateway.base_url, "switchyard", process_tree(gateway.proc.pid)),
            }
            return {
                "window_s": window_s,
                "cpus_split": split,
                "results": _rounds(targets, window_s, durations.warmup_s),
            }


def _rounds(targets: dict[str, tuple], window_s: float, warmup_s: float) -> dict:
    for url, model, _ in targets.values():  # first requests pay for connection set-up and caches
        run_windows(url, model, 4, max(0.5, warmup_s / 3), MAX_TOKENS)
    results: dict = {c: {t: [] for t in TARGETS} for c in CONCURRENCIES}
    for _ in range(ROUNDS):
        for concurrency in CONCURRENCIES:
            for target in TARGETS:
                url, model, procs = targets[target]
                results[concurrency][target].append(
                    run_windows(url, model, concurrency, window_s, MAX_TOKENS, procs)
                )
    return results


def _summary(windows: list[Window]) -> dict:
    ttft = [t for w in windows for t in w.ttft_s] or [float("nan")]
    tokens, wall = sum(w.tokens for w in windows), sum(w.wall_s for w in windows)
    return {
        "requests": sum(w.requests for w in windows),
        "errors": sum(w.errors for w in windows),
        "ttft_p50_ms": 1000 * percentile(ttft, 50),
        "ttft_p99_ms": 1000 * percentile(ttft, 99),
        "tokens_per_s": tokens / wall if wall else 0.0,
        "cpu_ms_per_1k_tokens": 1e6 * sum(w.proxy_cpu_s for w in windows) / tokens if tokens else 0.0,
    }


@pytest.mark.parametrize("concurrency", CONCURRENCIES)
def test_switchyard_streaming_overhead(measured, concurrency, perf_out):
    report = Report(f"switchyard_overhead_c{concurrency}")
    figures = {t: _summary(measured["results"][concurrency][t]) for t in TARGETS}
    report.note(
        f"tiny llama-server, {MAX_TOKENS} tokens per stream, concurrency {concurrency}, "
        f"{ROUNDS} interleaved rounds of {measured['window_s']:.1f} s per target"
        + (", engine on its own CPU" if measured["cpus_split"] else "")
    )
    for target in TARGETS:
        f = figures[target]
        report.figure(target, f)
        cpu = f"  proxy CPU {f['cpu_ms_per_1k_tokens']:5.1f} ms/1k tokens" if target != "direct" else ""
        report.note(
            f"{target:<8} TTFT p50 {f['ttft_p50_ms']:7.2f} ms  p99 {f['ttft_p99_ms']:7.2f} ms  "
            f"{f['tokens_per_s']:8.1f} tok/s{cpu}  ({f['requests']} streams, {f['errors']} errors)"
        )
    direct = figures["direct"]
    for proxy in ("nginx", "gateway"):
        f = figures[proxy]
        added = {
            "p50": f["ttft_p50_ms"] - direct["ttft_p50_ms"],
            "p99": f["ttft_p99_ms"] - direct["ttft_p99_ms"],
            "loss": 1 - f["tokens_per_s"] / direct["tokens_per_s"] if direct["tokens_per_s"] else 1.0,
        }
        report.figure(f"{proxy}_added", added)
        report.note(
            f"{proxy + ' adds':<13} TTFT p50 {added['p50']:+7.2f} ms  p99 {added['p99']:+7.2f} ms  "
            f"tokens/s {-100 * added['loss']:+6.2f} %"
        )
    ours = report.figures["gateway_added"]
    # Only the gateway's: llama-server now and then closes a kept-alive connection under the other two,
    # which neither the bare client nor nginx retries (the gateway does, before any byte is sent).
    report.check(
        "no failed streams through the gateway",
        figures["gateway"]["errors"] == 0,
        ", ".join(f"{t} {figures[t]['errors']}" for t in TARGETS),
    )
    report.check(
        "added TTFT p50",
        ours["p50"] <= TTFT_P50_TARGET_MS,
        f"{ours['p50']:+.2f} ms (target <= {TTFT_P50_TARGET_MS} ms; nginx "
        f"{report.figures['nginx_added']['p50']:+.2f} ms)",
    )
    report.check(
        "added TTFT p99",
        ours["p99"] <= TTFT_P99_TARGET_MS,
        f"{ours['p99']:+.2f} ms (target <= {TTFT_P99_TARGET_MS} ms; nginx "
        f"{report.figures['nginx_added']['p99']:+.2f} ms)",
    )
    report.check(
        "tokens/s loss",
        ours["loss"] <= TPS_LOSS_TARGET,
        f"{100 * ours['loss']:.2f} % (target <= {100 * TPS_LOSS_TARGET:.0f} %; nginx "
        f"{100 * report.figures['nginx_added']['loss']:.2f} %)",
    )
    report.publish(perf_out)
    assert_targets(report)
