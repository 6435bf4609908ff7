"""vLLM: ``vllm serve`` alone on one node; over Ray across nodes, natively or in NGC's container.

Documentation these commands follow:

- multi-node serving over Ray: ``ray start --head`` on the head, ``ray start
  --address=<head>:<port>`` on the others, then ``vllm serve`` on the head with
  ``--tensor-parallel-size`` (and ``--pipeline-parallel-size``) and
  ``--distributed-executor-backend ray``:
  docs.vllm.ai/en/stable/serving/parallelism_scaling.html ("Distributed
  inference and serving", "Running vLLM on multiple nodes"), and vLLM's
  examples/online_serving/run_cluster.sh, which starts each Ray node with
  ``ray start --block ... --node-ip-address`` and sets ``VLLM_HOST_IP`` per node.
- ``ray start`` options (``--head``, ``--port``, ``--address``,
  ``--node-ip-address``, ``--block``): docs.ray.io/en/latest/cluster/cli.html;
  ``RAY_ADDRESS`` tells a driver (``vllm serve``) which cluster to join:
  docs.ray.io/en/latest/ray-core/starting-ray.html.
- DGX Spark specifics: NVIDIA's playbook "vLLM for Inference / Run on two
  Sparks" (github.com/NVIDIA/dgx-spark-playbooks, nvidia/vllm/README.md) runs
  ``nvcr.io/nvidia/vllm:<tag>`` and sets ``VLLM_HOST_IP``, the fabric
  variables and ``RAY_memory_monitor_refresh_ms=0`` (Ray's memory monitor
  misreads unified memory).
- ``vllm serve`` flags (``--host``, ``--port``, ``--served-model-name``) and the
  counters ``vllm:generation_tokens_total`` / ``vllm:prompt_tokens_total``:
  docs.vllm.ai/en/stable/cli/serve.html and docs.vllm.ai/en/stable/usage/metrics.html.
  The generation counter grows on every engine step (the V1 engine adds each
  step's ``IterationStats.num_generation_tokens``, docs/design/metrics.md),
  so its rate follows decoding as it happens.
- containers: ``docker run --network host --ipc host --gpus all`` as in the
  playbook; ``-e NAME`` without a value passes NAME's value from docker's own
  environment (docs.docker.com/reference/cli/docker/container/run/#env).
- Ray's authentication is off by default, and a Ray cluster open to its
  network runs whatever job anyone submits. Every Ray process here runs
  with token authentication (``RAY_AUTH_MODE=token``, Ray 2.52 and later:
  docs.ray.io/en/latest/ray-security/token-auth.html), with a token made
  for this group at launch and given to every rank (each Ray node and the
  ``vllm serve`` driver) in ``RAY_AUTH_TOKEN``: in the environment only,
  never on a command line (a container gets it by name, ``-e
  RAY_AUTH_TOKEN``). The dashboard listens on loopback
  (``--dashboard-host 127.0.0.1``; reach it through SparkSync's tunnel), and
  ``--node-ip-address <fabric IP>`` binds Ray's cluster ports (GCS, raylet,
  object manager) to the fabric address rather than every interface (Ray
  binds to the node IP since 2.53).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from sparksync.core.workloads.commands.common import (
    RAY_STARTED,
    address,
    optional,
    require_model,
    serving_readiness,
    serving_tokens,
)
from sparksync.core.workloads.commands.context import GroupContext
from sparksync.core.workloads.launch_spec import RankLaunch, ReadinessProbe
from sparksync.core.workloads.recipe import TokensSpec

TOKENS = TokensSpec(
    kind="prometheus",
    decode_counter="vllm:generation_tokens_total",
    prefill_counter="vllm:prompt_tokens_total",
)
RAY_READY = ReadinessProbe(kind="log", pattern=RAY_STARTED)


RAY_DASHBOARD_HOST = "127.0.0.1"


def build(ctx: GroupContext, ray_token: str | None = None) -> list[RankLaunch]:
    """One node: vllm serve. More: Ray head (stage 0), Ray workers (1), then vllm serve (2).

    ``ray_token``: the group's Ray token (default: a new random one, made now).
    """
    if ctx.size == 1:
        return [serve(ctx, stage=0)]
    token = ray_token or secrets.token_urlsafe(32)
    workers = [ray_node(ctx, node, stage=1, token=token) for node in ctx.nodes[1:]]
    return [ray_node(ctx, ctx.head, stage=0, token=token), *workers, serve(ctx, stage=2, token=token)]


def ray_auth_env(token: str) -> dict[str, str]:
    """What every process of one Ray cluster needs to join it with token authentication."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}


def ray_node(ctx: GroupContext, node: str, stage: int, token: str) -> RankLaunch:
    ray_port, ip = ctx.recipe.ports.ray, ctx.ips[node]
    if node == ctx.head:
        role, ports = "ray-head", [ray_port]
        join = ["--head", "--port", str(ray_port), "--dashboard-host", RAY_DASHBOARD_HOST]
    else:
        role, join, ports = "ray-worker", ["--address", address(ctx.head_ip, ray_port)], []
    argv = ["ray", "start", "--block", *join, "--node-ip-address", ip]
    env = ctx.env(node, {"VLLM_HOST_IP": ip, "RAY_memory_monitor_refresh_ms": "0", **ray_auth_env(token)})
    return _launch(ctx, node, role, argv, RAY_READY, stage=stage, ports=ports, env=env)


def serve(ctx: GroupContext, stage: int, token: str | None = None) -> RankLaunch:
    recipe, par = ctx.recipe, ctx.recipe.parallelism
    argv = [
        "vllm", "serve", require_model(recipe), *optional("--served-model-name", recipe.served_name),
        "--host", recipe.http_host, "--port", str(recipe.ports.http),
        "--tensor-parallel-size", str(par.tensor),
        *(optional("--pipeline-parallel-size", par.pipeline) if par.pipeline > 1 else []),
        *(["--distributed-executor-backend", "ray"] if ctx.size > 1 else []), *recipe.extra_args,
    ]  # fmt: skip
    if ctx.size > 1:
        env = ctx.env(ctx.head, {**_driver_env(ctx), **ray_auth_env(token or secrets.token_urlsafe(32))})
    else:
        env = ctx.env(ctx.head)
    return _launch(
        ctx, ctx.head, "vllm-serve", argv, serving_readiness(ctx), stage=stage,
        ports=[recipe.ports.http], env=env, tokens=serving_tokens(ctx, TOKENS),
    )  # fmt: skip


def _driver_env(ctx: GroupContext) -> dict[str, str]:
    return {
        "VLLM_HOST_IP": ctx.head_ip,
        "RAY_memory_monitor_refresh_ms": "0",
        "RAY_ADDRESS": address(ctx.head_ip, ctx.recipe.ports.ray),
    }


def _launch(
    ctx: GroupContext, node: str, role: str, argv: list[str], ready: ReadinessProbe, **kw
) -> RankLaunch:
    container = ctx.recipe.container
    if container is None:
        return ctx.launch(node, role, argv, ready, **kw)
    name = f"sparksync-{ctx.group}-{role}"
    wrapped = docker_run(ctx, name, kw["env"], argv)
    return ctx.launch(node, role, wrapped, ready, stop_argv=[container.runtime, "stop", name], **kw)


def docker_run(ctx: GroupContext, name: str, env: dict[str, str], argv: Sequence[str]) -> list[str]:
    """``docker run`` around ``argv``: host network and IPC, every GPU, ``env`` passed by name."""
    container = ctx.recipe.container
    assert container is not None
    passed = [part for key in sorted(env) for part in ("-e", key)]
    mounts = [part for mount in container.mounts for part in ("-v", mount)]
    return [
        container.runtime, "run", "--rm", "--name", name, "--network", "host", "--ipc", "host",
        "--gpus", "all", *passed, *mounts, *container.extra_args, container.image, *argv,
    ]  # fmt: skip
