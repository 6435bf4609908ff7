"""llama.cpp: ``llama-server`` on the head, ``rpc-server`` on every other node.

Documentation these commands follow:

- llama-server options (``-m``, ``--alias``, ``--host``, ``--port``, ``-c``,
  ``-np``, ``-t``, ``-ngl``, ``--rpc``, ``--metrics``) and its ``/health`` and
  ``/metrics`` endpoints: github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md
- the RPC backend: ``rpc-server -H <host> -p <port>`` on each remote host and
  ``--rpc host:port,...`` on the main host, which splits the model's layers
  over its local devices and the RPC servers:
  github.com/ggml-org/llama.cpp/blob/master/tools/rpc/README.md (it warns:
  never expose rpc-server on an open network, hence ``-H <fabric IP>``).
- both checked against ``--help`` of the llama.cpp in llama-cpp-python 0.3.36,
  the build SparkSync ships; the counters ``llamacpp:tokens_predicted_total``
  and ``llamacpp:prompt_tokens_total`` are the ones that build serves.
- ``/slots`` (README "GET /slots"): per slot ``id``, ``id_task``,
  ``is_processing`` and ``next_token[0].n_decoded``, the tokens generated so
  far. The counter above grows only when a request ends (the slot's release),
  so live decode tokens/s reads the slots. The endpoint is on by default in
  this build, off by default in older ones; ``--slots`` asks for it either way.
"""

from __future__ import annotations

from sparksync.core.workloads.commands.common import (
    address,
    optional,
    require_model,
    serving_readiness,
    serving_tokens,
)
from sparksync.core.workloads.commands.context import GroupContext
from sparksync.core.workloads.launch_spec import RankLaunch, ReadinessProbe
from sparksync.core.workloads.recipe import TokensSpec

# ggml's abort otherwise forks gdb to print a backtrace: it stalls the crash
# for seconds and pushes the one line that says what went wrong (say, an
# rpc-server it could not reach) out of the last log lines the user is shown.
ENGINE_ENV = {"GGML_NO_BACKTRACE": "1"}

TOKENS = TokensSpec(
    kind="prometheus",
    decode_counter="llamacpp:tokens_predicted_total",
    prefill_counter="llamacpp:prompt_tokens_total",
    slots_path="/slots",
)


def build(ctx: GroupContext) -> list[RankLaunch]:
    """rpc-servers first (stage 0); llama-server connects to them at load, so it starts after."""
    workers = [rpc_server(ctx, node) for node in ctx.nodes[1:]]
    return [*workers, llama_server(ctx, stage=1 if workers else 0)]


def rpc_server(ctx: GroupContext, node: str) -> RankLaunch:
    opts, ip, port = ctx.recipe.llamacpp, ctx.ips[node], ctx.recipe.ports.rpc
    argv = [opts.rpc_binary, "-H", ip, "-p", str(port), *optional("-t", opts.threads)]
    ready = ReadinessProbe(kind="tcp", host=ip, port=port)  # rpc-server speaks no HTTP
    return ctx.launch(node, "rpc-server", argv, ready, ports=[port], env=ctx.env(node, ENGINE_ENV))


def llama_server(ctx: GroupContext, stage: int) -> RankLaunch:
    recipe, opts = ctx.recipe, ctx.recipe.llamacpp
    argv = [
        opts.server_binary, "-m", require_model(recipe), *optional("--alias", recipe.served_name),
        "--host", recipe.http_host, "--port", str(recipe.ports.http),
        *optional("-c", opts.context), *optional("-np", opts.parallel), *optional("-t", opts.threads),
        *optional("-ngl", opts.gpu_layers), *_rpc_servers(ctx), "--metrics", "--slots", *recipe.extra_args,
    ]  # fmt: skip
    return ctx.launch(
        ctx.head, "llama-server", argv, serving_readiness(ctx), stage=stage,
        ports=[recipe.ports.http], tokens=serving_tokens(ctx, TOKENS), env=ctx.env(ctx.head, ENGINE_ENV),
    )  # fmt: skip


def _rpc_servers(ctx: GroupContext) -> list[str]:
    if ctx.size == 1:
        return []
    port = ctx.recipe.ports.rpc
    return ["--rpc", ",".join(address(ctx.ips[n], port) for n in ctx.nodes[1:])]
