"""The device check's body (run by gpu_check.sh): one long answer from llama-server under SparkSync's agent.

Prints, in this order:
- the GPU readings the agent reports (utilisation, temperature, power, power limit, SM clock,
  memory, per-process memory), each value or the reason it is missing ("unsupported");
- the live decode tokens/s the agent sampled while one long answer was generated, against
  the server's own ``predicted_per_second``;
- SparkSync's decode bound for the model it wrote, on this GPU's memory bandwidth (from NVML:
  bus width x memory clock x 2; or --bandwidth-gbs), and the answer's percentage of it.

The last line is one JSON object with every figure (also written to $OUT/gpu_check.json when
OUT is set). Exit status: 0 when live tokens/s followed the answer (most samples above zero,
their mean within 20 % of the server's figure), 1 when not, 2 when the check could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

TOLERANCE = 0.20
EDGE_S = 1.5  # samples this close to the answer's start or end also span time without generation
EDGE_SHARE = 0.15  # ... but never more than this share of a short answer at each end
SHAPES = {  # (n_embd, n_layer, n_head, n_head_kv, n_ff): the GPU's must be big enough to take seconds
    "cpu": (512, 8, 8, 4, 1376),
    "cuda": (2048, 16, 16, 8, 5632),
}
ANSWER_TOKENS = {"cpu": 3000, "cuda": 6000}


def main() -> int:
    args = _args()
    os.environ.setdefault("SPARKSYNC_HOME", tempfile.mkdtemp(prefix="gpu-check-home-"))
    from sparksync.core.agents import LocalAgent
    from sparksync.core.engines.llamacpp_build import find_binaries

    binaries = find_binaries(args.flavour)
    if binaries is None:
        print(f"gpu_check: no {args.flavour} llama-server in the engine cache", flush=True)
        return 2
    print(f"gpu_check: llama-server {binaries.llama_server}", flush=True)
    model = _write_model(args)
    agent = LocalAgent(sample_hz=4.0).start()
    try:
        with agent.client(timeout=30.0) as client:
            report = _check(args, client, binaries, model)
    finally:
        agent.stop()
    summary = {**report, "live_tokens": {k: v for k, v in report["live_tokens"].items() if k != "samples"}}
    print(json.dumps(summary), flush=True)
    out = os.environ.get("OUT")
    if out:
        Path(out, "gpu_check.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0 if report["live_tokens"]["ok"] else 1


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flavour", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--tokens", type=int, help="length of the long answer (default: per flavour)")
    parser.add_argument("--embd", type=int, help="the model's hidden size (default: per flavour)")
    parser.add_argument("--layers", type=int, help="the model's layers (default: per flavour)")
    parser.add_argument("--bandwidth-gbs", type=float, help="memory bandwidth for the bound (default: NVML's)")
    parser.add_argument("--threads", type=int, default=1, help="llama-server's CPU threads")
    return parser.parse_args()


def _write_model(args) -> Path:
    from sparksync.core.engines.tiny_model import ModelShape, byte_vocabulary, write_gguf

    embd, layers, heads, kv_heads, ff = SHAPES[args.flavour]
    embd, layers = args.embd or embd, args.layers or layers
    tokens = args.tokens or ANSWER_TOKENS[args.flavour]
    shape = ModelShape("gpu-check", n_embd=embd, n_layer=layers, n_head=heads, n_head_kv=kv_heads, n_ff=ff,
                       n_ctx=max(4096, 2 ** (tokens + 256).bit_length()), seed=7)  # fmt: skip
    began = time.monotonic()
    path = write_gguf(Path(tempfile.mkdtemp(prefix="gpu-check-model-")) / "gpu-check.gguf", shape, byte_vocabulary())
    print(f"gpu_check: wrote a random {embd}-dim {layers}-layer model ({path.stat().st_size / 1e9:.2f} GB) in "
          f"{time.monotonic() - began:.0f} s", flush=True)  # fmt: skip
    args.tokens, args.context = tokens, shape.n_ctx
    return path


def _check(args, client, binaries, model: Path) -> dict:
    from sparksync.core.workloads.fabric import Fabric
    from sparksync.core.workloads.launches import build_group
    from sparksync.core.workloads.local_model import free_port
    from sparksync.core.workloads.recipe import Recipe
    from sparksync_agent.protocol import RankState

    recipe = Recipe.model_validate({
        "name": "gpu-check", "engine": "llama.cpp", "model": str(model), "served_name": "gpu-check",
        "ports": {"http": free_port()}, "readiness": {"kind": "http", "path": "/v1/models", "timeout_s": 180},
        "llamacpp": {"server_binary": str(binaries.llama_server), "context": args.context, "parallel": 1,
                     "threads": args.threads, "gpu_layers": 999 if args.flavour == "cuda" else None},
    })  # fmt: skip
    (launch,) = build_group("gpu-check-1", recipe, ["this-computer"], Fabric()).ranks
    client.start_rank("gpu-check", launch)
    deadline = time.monotonic() + 180
    while (status := client.workload("gpu-check").ranks[0]).state is RankState.starting:
        if time.monotonic() > deadline:
            raise SystemExit("gpu_check: llama-server was not ready in 180 s")
        time.sleep(0.2)
    if status.state is not RankState.ready:
        print(f"gpu_check: llama-server {status.state.value}: {status.message}\n" + "\n".join(status.last_lines))
        raise SystemExit(2)
    try:
        since = client.telemetry(0).last_seq
        answer, began, ended = _long_answer(launch.ports[0], args.tokens)
        time.sleep(1.5)  # the samples of its last second
        samples = client.telemetry(since).samples
    finally:
        client.stop_workload("gpu-check", grace_s=10.0)
    live = _live_tokens(samples, answer, began, ended)
    gpu = _gpu_readings(samples)
    bound = _bound(args, model, answer, gpu, live["server_tps"])
    return {"flavour": args.flavour, "gpu": gpu, "live_tokens": live, "bound": bound}


def _long_answer(port: int, tokens: int):
    import httpx

    body = {"model": "gpu-check", "messages": [{"role": "user", "content": "Tell a long story."}],
            "max_tokens": tokens, "ignore_eos": True, "stream": False}  # fmt: skip
    began = time.time()
    answer = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=600).raise_for_status()
    return answer.json(), began, time.time()


def _live_tokens(samples, answer: dict, began: float, ended: float) -> dict:
    timings = answer["timings"]
    server_tps = timings["predicted_per_second"]
    start = began + timings.get("prompt_ms", 0.0) / 1000
    edge = min(EDGE_S, EDGE_SHARE * (ended - start))  # a fast machine answers in a few seconds
    during = [
        next((f.decode_tps or 0.0 for f in s.workloads or [] if f.workload_id == "gpu-check"), 0.0)
        for s in samples if start + edge <= s.ts <= ended - edge
    ]  # fmt: skip
    mean = statistics.fmean(during) if during else 0.0
    above = sum(1 for v in during if v > 0)
    ok = bool(during) and above > len(during) / 2 and abs(mean - server_tps) <= TOLERANCE * server_tps
    print(f"live tokens/s: {len(during)} samples during {ended - began:.1f} s of answer, {above} above zero, "
          f"mean {mean:,.1f} against the server's {server_tps:,.1f} ({'ok' if ok else 'NOT within 20 %'})")
    shown = [round(v) for v in during]
    print(f"  samples: {shown if len(shown) <= 40 else [*shown[:20], '...', *shown[-20:]]}", flush=True)
    return {"samples": during, "above_zero": above, "mean": mean, "server_tps": server_tps,
            "answer_tokens": timings.get("predicted_n"), "seconds": ended - began, "ok": ok}  # fmt: skip


def _gpu_readings(samples) -> list[dict]:
    latest = next((s for s in reversed(samples) if s.gpu), None)
    if latest is None:
        print("GPU readings: none (the agent found no NVML GPU on this machine)", flush=True)
        return []
    found = []
    for gpu in latest.gpu:
        readings = {name: _reading(getattr(gpu, name)) for name in (
            "utilization_pct", "temperature_c", "power_w", "power_limit_w", "sm_clock_mhz",
            "memory_used_bytes", "memory_total_bytes")}  # fmt: skip
        processes = [{"pid": p.pid, "name": p.name, "used_memory_bytes": p.used_memory_bytes} for p in gpu.processes]
        print(f"GPU {gpu.index} {gpu.name}: " + ", ".join(f"{k} {v}" for k, v in readings.items()))
        print(f"  processes: {processes or 'none listed'}", flush=True)
        found.append({"index": gpu.index, "name": gpu.name, "readings": readings, "processes": processes})
    return found


def _reading(reading) -> str:
    return f"{reading.value:g}" if reading.value is not None else reading.status.value


def _bound(args, model: Path, answer: dict, gpu: list[dict], server_tps: float) -> dict:
    from sparksync.core.planner import Hardware, decode_bound, read_model

    bandwidth, source = args.bandwidth_gbs, "--bandwidth-gbs"
    if bandwidth is None:
        bandwidth, source = _nvml_bandwidth_gbs(), "NVML (bus width x memory clock x 2)"
    if bandwidth is None:
        bandwidth, source = 273.0, "assumed: a DGX Spark's 273 GB/s (no NVML bandwidth here)"
    spec = read_model(model)
    context = answer["usage"]["prompt_tokens"] + answer["usage"]["completion_tokens"] // 2
    bound = decode_bound(spec, 1, Hardware(memory_bandwidth_gbs=bandwidth), context=context)
    percent = 100 * server_tps / bound.tokens_per_second
    print(f"bound: {bound.tokens_per_second:,.1f} tok/s for {spec.total_weight_bytes / 1e9:.2f} GB of weights at "
          f"{bandwidth:,.0f} GB/s ({source}); the server's {server_tps:,.1f} is {percent:.1f} % of it", flush=True)
    return {"tokens_per_second": bound.tokens_per_second, "bandwidth_gbs": bandwidth, "bandwidth_source": source,
            "weights_bytes": spec.total_weight_bytes, "percent_of_bound": percent}  # fmt: skip


def _nvml_bandwidth_gbs() -> float | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            bus_bits = pynvml.nvmlDeviceGetMemoryBusWidth(handle)
            clock_mhz = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML, no GPU, or a reading it does not give: the caller says so
        return None
    return bus_bits / 8 * clock_mhz * 1e6 * 2 / 1e9


if __name__ == "__main__":
    sys.exit(main())
